"""Turns gpu-check.sh's JSON lines (bench.jsonl from kvengine, torch.jsonl from PyTorch) into the
markdown tables BENCHMARKS.md records."""
import json
import pathlib
import sys


def rows(path):
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def main(folder):
    ours, torch = rows(folder / "bench.jsonl"), rows(folder / "torch.jsonl")
    sdpa = {r["shape"]: r for r in torch if r["bench"] == "torch_sdpa_decode_attention"}
    hf = {(r["model"], r["B"]): r for r in torch if r["bench"] == "torch_hf_decode_e2e"}
    print("Decode attention, B=16, T=4096, bf16 (bytes = K+V read once):\n")
    print("| shape | H / H_kv / D | kvengine µs | kvengine GB/s | share of 4.8 TB/s | torch SDPA µs | SDPA GB/s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in (r for r in ours if r["bench"] == "decode_attention"):
        t = sdpa.get(r["shape"], {})
        print(f"| {r['shape']} | {r['H']} / {r['H_kv']} / {r['D']} | {r['us']} | {r['GBps']} | {r['peak_share'] * 100:.0f}% | {t.get('us', '–')} | {t.get('GBps', '–')} |")
    print("\nEnd-to-end greedy decode after a 128-token prompt, bf16, random weights at the model's shape:\n")
    print("| model | batch | kvengine ms/step | kvengine tokens/s | HF transformers (SDPA) ms/step | HF tokens/s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in (r for r in ours if r["bench"] == "decode_e2e"):
        t = hf.get((r["model"], r["B"]), {})
        print(f"| {r['model']} | {r['B']} | {r['ms_per_step']} | {r['tokens_per_s']} | {t.get('ms_per_step', '–')} | {t.get('tokens_per_s', '–')} |")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
