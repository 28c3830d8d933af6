#!/usr/bin/env python3
"""Draws the benchmark's plots from benches/out/results.json (written by benches/compare.ts):

  docs/bench-context.png  tokens/s against context length (prefill and batch-1 decode), per model
  docs/bench-samples.png  aggregate tokens/s against samples from one prompt, per model
  (into benches/out/ instead for a --quick run's results)

Both engines on every plot, each at its best thread count per point (as the tables report them).
matplotlib is installed on first use into .cache/py (git-ignored), from PyPI via pip.

  python3 scripts/plot-bench.py [results.json] [out-dir]
"""
import importlib
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, ".cache", "py")


def import_pyplot():
    sys.path.insert(0, CACHE)
    try:
        import matplotlib
    except ImportError:
        print(f"plot-bench: installing matplotlib into {CACHE}", file=sys.stderr)
        subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "--target", CACHE, "matplotlib>=3.8"])
        # The folder did not exist when the path was added, and the import system cached that.
        importlib.invalidate_caches()
        import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    return plt


ENGINES = {"kvengine": "tab:blue", "llama.cpp": "tab:orange"}


def best(runs, engine, figures, key, x):
    """The best tokens/s of `engine` at each x over its thread counts, as {x: tok/s}."""
    out = {}
    for run in runs:
        if run["engine"] != engine:
            continue
        for f in run[figures]:
            out[f[key]] = max(out.get(f[key], 0), f[x])
    return dict(sorted(out.items()))


def grid(plt, n):
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(max(5 * cols, 8), 4 * rows + 0.6), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def label_axes(ax, heading, xlabel, ylabel):
    ax.set_title(heading)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def save(fig, results, heading, path):
    fig.suptitle(title(results, heading))
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def plot_context(plt, results, path):
    models = results["models"]
    fig, axes = grid(plt, len(models))
    for ax, m in zip(axes, models):
        for engine, color in ENGINES.items():
            pre = best(m["runs"], engine, "prefill", "tokens", "tokPerSec")
            dec = best(m["runs"], engine, "decode", "context", "tokPerSec")
            if pre:
                ax.plot(list(pre), list(pre.values()), "o-", color=color, label=f"{engine} prefill")
            if dec:
                ax.plot(list(dec), list(dec.values()), "s--", color=color, label=f"{engine} decode (batch 1)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        contexts = sorted(set(m["plan"]["prefillLengths"]) | set(m["plan"]["decodeContexts"]))
        ax.set_xticks(contexts, [str(c) for c in contexts])
        label_axes(ax, m["label"], "context length (prompt tokens)", "tokens/s")
    save(fig, results, "tokens/s against context length", path)


def plot_samples(plt, results, path):
    models = results["models"]
    fig, axes = grid(plt, len(models))
    for ax, m in zip(axes, models):
        for engine, color in ENGINES.items():
            agg = best(m["runs"], engine, "aggregate", "samples", "tokPerSec")
            if agg:
                ax.plot(list(agg), list(agg.values()), "o-", color=color, label=engine)
        p = m["plan"]
        ax.set_xticks(p["samples"])
        label_axes(ax, m["label"], f"samples from one {p['samplePrompt']}-token prompt ({p['sampleTokens']} tokens each)", "aggregate tokens/s (prefill included)")
    save(fig, results, "aggregate tokens/s against number of samples", path)


def title(results, what):
    mach = results["machine"]
    quick = " — QUICK smoke run" if results.get("quick") else ""
    commit = mach["kvengineCommit"] + ("+uncommitted" if mach.get("workingTreeDirty") else "")
    return f"{what}{quick}\n{mach['cpu']}, {mach['cores']} cores; kvengine {commit} vs node-llama-cpp {mach['nodeLlamaCpp']}"


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "benches", "out", "results.json")
    with open(src) as f:
        results = json.load(f)
    # A quick smoke run's plots must not replace the real ones in docs/.
    default_dir = os.path.join(ROOT, "benches", "out") if results.get("quick") else os.path.join(ROOT, "docs")
    out_dir = sys.argv[2] if len(sys.argv) > 2 else default_dir
    plt = import_pyplot()
    os.makedirs(out_dir, exist_ok=True)
    for name, draw in (("bench-context.png", plot_context), ("bench-samples.png", plot_samples)):
        path = os.path.join(out_dir, name)
        draw(plt, results, path)
        print(f"plot-bench: wrote {path}")


if __name__ == "__main__":
    main()
