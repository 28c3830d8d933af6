#!/usr/bin/env python3
"""Golden fixtures for kvengine's nanoGPT checkpoint support.

Usage:
    python scripts/nanogpt/make_fixtures.py [out_dir]

`out_dir` defaults to crate/tests/fixtures/nanogpt. Needs torch (CPU is enough) and nothing else.
nanoGPT's code is not used or vendored: this script writes the format karpathy/nanoGPT's train.py
writes (`torch.save` of {'model', 'optimizer', 'model_args', 'iter_num', 'best_val_loss', 'config'})
and computes the logits with its own PyTorch GPT-2 forward, written from the model's semantics.
The output is laid out like a nanoGPT checkout, out-dirs and data/ side by side:

    out-bias/ckpt.pt                  bias=True, n_head=4, plain state-dict keys, best_val_loss a tensor
    out-bias/expected.json            text, ids, model_args, greedy prompt and continuation
    out-bias/logits.f32               little-endian f32, (64, vocab) row-major, every position
    out-nobias/ckpt.pt                bias=False, n_head=6, keys prefixed `_orig_mod.` (torch.compile),
                                      best_val_loss a float
    out-nobias/expected.json, logits.f32
    data/shakespeare_char/meta.pkl    char vocabulary (65 chars of tinyshakespeare), as prepare.py
                                      pickles it; found from a ckpt as <ckpt dir>/../data/<dataset>/

Weights are random but large (not nanoGPT's std 0.02) so that every parameter moves the logits,
and each checkpoint has had one real AdamW step so its optimizer state is a genuine one.
"""

import collections
import json
import math
import os
import pickle
import struct
import sys

import torch
import torch.nn.functional as F

OUT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../crate/tests/fixtures/nanogpt"))
# The 65 distinct characters of tinyshakespeare's input.txt.
CHARS = "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
TEXT = "ROMEO:\nBut soft! what light through yonder window breaks? 'Tis t"
GREEDY_PROMPT = 16
GREEDY_NEW = 16
EPS = 1e-5

# One thread: identical float32 results on every run on a given machine.
torch.set_num_threads(1)


def make_meta():
    # prepare.py builds the vocabulary as sorted(set(text)); do the same so the id order matches.
    chars = sorted(set(CHARS))
    assert len(chars) == 65 and "".join(chars) == CHARS
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    meta = {"vocab_size": len(chars), "itos": itos, "stoi": stoi}
    d = os.path.join(OUT, "data", "shakespeare_char")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "meta.pkl"), "wb") as f:
        pickle.dump(meta, f)  # default protocol, as prepare.py
    return meta


class LayerNorm(torch.nn.Module):
    # nanoGPT's LayerNorm: weight always, bias only when bias=True (nn.LayerNorm could not drop it).
    def __init__(self, n, bias):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))
        self.bias = torch.nn.Parameter(torch.zeros(n)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, EPS)


class Attention(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        C = a["n_embd"]
        self.n_head = a["n_head"]
        self.c_attn = torch.nn.Linear(C, 3 * C, bias=a["bias"])
        self.c_proj = torch.nn.Linear(C, C, bias=a["bias"])

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        C = a["n_embd"]
        self.c_fc = torch.nn.Linear(C, 4 * C, bias=a["bias"])
        self.gelu = torch.nn.GELU()
        self.c_proj = torch.nn.Linear(4 * C, C, bias=a["bias"])

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.ln_1 = LayerNorm(a["n_embd"], a["bias"])
        self.attn = Attention(a)
        self.ln_2 = LayerNorm(a["n_embd"], a["bias"])
        self.mlp = MLP(a)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(torch.nn.Module):
    """Module tree that yields nanoGPT's state-dict names and order; used to train one step.
    Its forward (nn/SDPA primitives) also cross-checks the hand-written reference below."""

    def __init__(self, a):
        super().__init__()
        self.transformer = torch.nn.ModuleDict(dict(
            wte=torch.nn.Embedding(a["vocab_size"], a["n_embd"]),
            wpe=torch.nn.Embedding(a["block_size"], a["n_embd"]),
            h=torch.nn.ModuleList([Block(a) for _ in range(a["n_layer"])]),
            ln_f=LayerNorm(a["n_embd"], a["bias"]),
        ))
        self.lm_head = torch.nn.Linear(a["n_embd"], a["vocab_size"], bias=False)
        # Tied as in nanoGPT: one Parameter under two names, so torch.save stores one storage.
        self.transformer.wte.weight = self.lm_head.weight

    def forward(self, idx):
        pos = torch.arange(idx.shape[1])
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def randomize(model):
    for name, p in model.named_parameters():
        if name.endswith("wte.weight") or name.endswith("wpe.weight") or name == "lm_head.weight":
            p.copy_(torch.randn_like(p) * 0.2)
        elif p.dim() == 2:
            p.copy_(torch.randn_like(p) / math.sqrt(p.shape[1]))
        elif name.endswith("bias"):
            p.copy_(torch.randn_like(p) * 0.1)
        else:  # LayerNorm weight: away from 1 so a skipped scale shows.
            p.copy_(1 + 0.1 * torch.randn_like(p))


def expected_shapes(a):
    C, V, L = a["n_embd"], a["vocab_size"], a["n_layer"]
    shapes = collections.OrderedDict([("transformer.wte.weight", (V, C)), ("transformer.wpe.weight", (a["block_size"], C))])
    for i in range(L):
        p = f"transformer.h.{i}."
        for name, w, b in [("ln_1", (C,), (C,)), ("attn.c_attn", (3 * C, C), (3 * C,)), ("attn.c_proj", (C, C), (C,)),
                           ("ln_2", (C,), (C,)), ("mlp.c_fc", (4 * C, C), (4 * C,)), ("mlp.c_proj", (C, 4 * C), (C,))]:
            shapes[p + name + ".weight"] = w
            if a["bias"]:
                shapes[p + name + ".bias"] = b
    shapes["transformer.ln_f.weight"] = (C,)
    if a["bias"]:
        shapes["transformer.ln_f.bias"] = (C,)
    shapes["lm_head.weight"] = (V, C)
    return shapes


def train_config(a, out_dir, compile_):
    # The keys train.py records (its config_keys), with shakespeare_char-like values.
    return {
        "out_dir": out_dir, "eval_interval": 250, "log_interval": 10, "eval_iters": 200, "eval_only": False,
        "always_save_checkpoint": False, "init_from": "scratch", "wandb_log": False, "wandb_project": "shakespeare-char",
        "wandb_run_name": "mini-gpt", "dataset": "shakespeare_char", "gradient_accumulation_steps": 1, "batch_size": 4,
        "block_size": a["block_size"], "n_layer": a["n_layer"], "n_head": a["n_head"], "n_embd": a["n_embd"],
        "dropout": a["dropout"], "bias": a["bias"], "learning_rate": 1e-3, "max_iters": 5000, "weight_decay": 0.1,
        "beta1": 0.9, "beta2": 0.99, "grad_clip": 1.0, "decay_lr": True, "warmup_iters": 100, "lr_decay_iters": 5000,
        "min_lr": 1e-4, "backend": "nccl", "device": "cpu", "dtype": "float32", "compile": compile_,
    }


def write_checkpoint(name, a, seed, compiled, best_val_loss):
    torch.manual_seed(seed)
    model = GPT(a)
    with torch.no_grad():
        randomize(model)
    cfg = train_config(a, name, compiled)
    # train.py's optimizer: weight decay on matrices and embeddings only, betas from the config.
    params = [p for _, p in model.named_parameters()]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=cfg["learning_rate"], betas=(cfg["beta1"], cfg["beta2"]))
    x = torch.randint(a["vocab_size"], (cfg["batch_size"], a["block_size"]))
    y = torch.randint(a["vocab_size"], (cfg["batch_size"], a["block_size"]))
    loss = F.cross_entropy(model(x).view(-1, a["vocab_size"]), y.view(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
    opt.step()
    opt.zero_grad(set_to_none=True)

    state = model.state_dict()
    assert list(state) == list(expected_shapes(a)), "module tree does not give nanoGPT's key names/order"
    if compiled:
        # What state_dict() of torch.compile's OptimizedModule returns: same tensors, keys prefixed.
        state = collections.OrderedDict(("_orig_mod." + k, v) for k, v in state.items())
    checkpoint = {"model": state, "optimizer": opt.state_dict(), "model_args": dict(a), "iter_num": 250,
                  "best_val_loss": best_val_loss, "config": cfg}
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "ckpt.pt")
    torch.save(checkpoint, path)
    return path


def load_state(path):
    """Reads the file back and checks its state dict strictly: exact names, shapes, f32, tie."""
    ck = torch.load(path, map_location="cpu", weights_only=True)
    assert set(ck) == {"model", "optimizer", "model_args", "iter_num", "best_val_loss", "config"}
    a = ck["model_args"]
    sd = ck["model"]
    prefix = "_orig_mod."
    if all(k.startswith(prefix) for k in sd):
        sd = collections.OrderedDict((k[len(prefix):], v) for k, v in sd.items())
    shapes = expected_shapes(a)
    assert list(sd) == list(shapes), f"keys differ: {set(sd) ^ set(shapes)}"
    for k, v in sd.items():
        assert tuple(v.shape) == shapes[k] and v.dtype == torch.float32, k
    wte, head = sd["transformer.wte.weight"], sd["lm_head.weight"]
    assert torch.equal(wte, head), "lm_head.weight must equal the tied wte"
    assert wte.untyped_storage().data_ptr() == head.untyped_storage().data_ptr(), "tie lost: two storages"
    # Also loads strictly into the module tree (missing/unexpected keys raise).
    GPT(a).load_state_dict(sd, strict=True)
    assert len(ck["optimizer"]["state"]) == len(shapes) - 1  # every distinct parameter has Adam moments
    return ck, a, sd


def layer_norm(x, w, b):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    y = (x - mean) / torch.sqrt(var + EPS) * w
    return y + b if b is not None else y


def linear(x, sd, name):
    y = x @ sd[name + ".weight"].T
    b = sd.get(name + ".bias")
    return y + b if b is not None else y


def reference_forward(sd, a, ids):
    """GPT-2 forward from the semantics alone (no nn modules, no SDPA): logits for every position."""
    T, C, H = len(ids), a["n_embd"], a["n_head"]
    hs = C // H
    idx = torch.tensor(ids)
    x = sd["transformer.wte.weight"][idx] + sd["transformer.wpe.weight"][:T]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(a["n_layer"]):
        p = f"transformer.h.{i}."
        h = layer_norm(x, sd[p + "ln_1.weight"], sd.get(p + "ln_1.bias"))
        qkv = linear(h, sd, p + "attn.c_attn")
        # c_attn's output rows are q, then k, then v; heads are consecutive slices of each.
        q, k, v = (t.view(T, H, hs).transpose(0, 1) for t in qkv.split(C, dim=1))
        att = (q @ k.transpose(1, 2)) / math.sqrt(hs)
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        y = (att @ v).transpose(0, 1).reshape(T, C)
        x = x + linear(y, sd, p + "attn.c_proj")
        h = layer_norm(x, sd[p + "ln_2.weight"], sd.get(p + "ln_2.bias"))
        h = linear(h, sd, p + "mlp.c_fc")
        h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))  # exact GELU, not tanh
        x = x + linear(h, sd, p + "mlp.c_proj")
    x = layer_norm(x, sd["transformer.ln_f.weight"], sd.get("transformer.ln_f.bias"))
    return x @ sd["lm_head.weight"].T


def greedy(sd, a, prompt, n):
    ids = list(prompt)
    min_gap = float("inf")
    for _ in range(n):
        logits = reference_forward(sd, a, ids[-a["block_size"]:])[-1]
        top = logits.topk(2).values
        min_gap = min(min_gap, (top[0] - top[1]).item())
        ids.append(int(logits.argmax()))
    # A near-tie would make the continuation depend on rounding; the engine must reproduce it.
    assert min_gap > 1e-3, f"greedy step too close to a tie: {min_gap}"
    return ids[len(prompt):], min_gap


def fixture(name, a, seed, compiled, best_val_loss, stoi):
    path = write_checkpoint(name, a, seed, compiled, best_val_loss)
    ck, a, sd = load_state(path)
    ids = [stoi[c] for c in TEXT]
    logits = reference_forward(sd, a, ids)
    assert logits.shape == (len(ids), a["vocab_size"]) and logits.dtype == torch.float32
    assert torch.isfinite(logits).all()

    # Independent checks of the reference: float64 and the nn/SDPA module path must agree.
    sd64 = {k: v.double() for k, v in sd.items()}
    d64 = (reference_forward(sd64, a, ids) - logits.double()).abs().max().item()
    model = GPT(a)
    model.load_state_dict(sd, strict=True)
    dmod = (model(torch.tensor([ids]))[0] - logits).abs().max().item()
    assert d64 < 1e-5 and dmod < 1e-5, (d64, dmod)

    # Every bias must move the logits, so an engine that drops one cannot pass.
    biases = [k for k in sd if k.endswith(".bias")]
    assert bool(biases) == a["bias"]
    for k in biases:
        zeroed = dict(sd, **{k: torch.zeros_like(sd[k])})
        assert (reference_forward(zeroed, a, ids) - logits).abs().max().item() > 1e-3, f"{k} does not matter"

    gen, gap = greedy(sd, a, ids[:GREEDY_PROMPT], GREEDY_NEW)
    d = os.path.dirname(path)
    with open(os.path.join(d, "logits.f32"), "wb") as f:
        f.write(struct.pack(f"<{logits.numel()}f", *logits.reshape(-1).tolist()))
    expected = {
        "text": TEXT,
        "ids": ids,
        "model_args": a,
        "logits": {"file": "logits.f32", "dtype": "f32le", "shape": list(logits.shape)},
        "greedy_prompt_ids": ids[:GREEDY_PROMPT],
        "greedy_ids": gen,
        "generator": f"torch {torch.__version__}, scripts/nanogpt/make_fixtures.py",
    }
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print(f"{name}: keys={len(sd)} prefixed={compiled} |f64-f32|={d64:.1e} |module-ref|={dmod:.1e} "
          f"biases checked={len(biases)} greedy min gap={gap:.3f}")
    print(f"  logits[0][:5] = {[round(v, 6) for v in logits[0, :5].tolist()]}")
    print(f"  greedy_ids = {gen} -> {''.join(ITOS[i] for i in gen)!r}")


def main():
    global ITOS
    meta = make_meta()
    ITOS = meta["itos"]
    assert len(TEXT) == 64 and all(c in meta["stoi"] for c in TEXT)
    base = dict(n_layer=2, n_head=4, n_embd=48, block_size=64, bias=True, vocab_size=meta["vocab_size"], dropout=0.0)
    # train.py saves best_val_loss as estimate_loss's 0-dim tensor; a float is also seen, so one each.
    fixture("out-bias", base, 1337, False, torch.tensor(1.4697), meta["stoi"])
    fixture("out-nobias", dict(base, n_head=6, bias=False), 1338, True, 1.4697, meta["stoi"])
    total = 0
    for root, _, files in os.walk(OUT):
        for fn in sorted(files):
            size = os.path.getsize(os.path.join(root, fn))
            total += size
            print(f"{os.path.relpath(os.path.join(root, fn), OUT):40s} {size:>9d}")
    assert total < 2_500_000, f"fixtures too large: {total} bytes"
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
