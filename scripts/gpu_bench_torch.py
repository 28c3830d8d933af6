"""PyTorch on the shapes crate/examples/cuda_bench.rs measures, for BENCHMARKS.md: decode
attention through scaled_dot_product_attention, and end-to-end greedy decode of a randomly
initialised Hugging Face Llama with SDPA attention. One JSON object per line, the same keys as
the Rust bench. Run by scripts/gpu-check.sh where torch is importable."""
import json
import time

import torch
import torch.nn.functional as F

PEAK_GBPS = 4800.0


def timed(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters


def attention(name, h, hkv, d, batch=16, length=4096):
    dt = torch.bfloat16
    q = torch.randn(batch, h, 1, d, device="cuda", dtype=dt)
    k = torch.randn(batch, hkv, length, d, device="cuda", dtype=dt)
    v = torch.randn(batch, hkv, length, d, device="cuda", dtype=dt)
    secs = timed(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=hkv != h), 10, 100)
    gbps = 2 * batch * length * hkv * d * 2 / secs / 1e9
    print(json.dumps({"bench": "torch_sdpa_decode_attention", "shape": name, "B": batch, "T": length, "H": h, "H_kv": hkv, "D": d,
                      "dtype": "bf16", "us": round(secs * 1e6, 1), "GBps": round(gbps), "peak_share": round(gbps / PEAK_GBPS, 3)}), flush=True)


def decode(name, cfg, batches, prompt=128, steps=64):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**cfg, attn_implementation="sdpa", torch_dtype=torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    for batch in batches:
        ids = torch.randint(0, cfg["vocab_size"], (batch, prompt), device="cuda")

        def run(n):
            with torch.inference_mode():
                model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, pad_token_id=0)

        # Decode time alone: a run of `steps` new tokens minus a run of one (the prefill).
        full, first = timed(lambda: run(steps), 1, 3), timed(lambda: run(1), 1, 3)
        per_step = (full - first) / (steps - 1)
        print(json.dumps({"bench": "torch_hf_decode_e2e", "model": name, "B": batch, "prompt": prompt, "dtype": "bf16",
                          "ms_per_step": round(per_step * 1e3, 2), "tokens_per_s": round(batch / per_step)}), flush=True)


SMOLLM = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
              num_key_value_heads=3, head_dim=64, rope_theta=100000.0, tie_word_embeddings=True, max_position_embeddings=2048)
LLAMA_1B = dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                num_key_value_heads=8, head_dim=64, rope_theta=500000.0, tie_word_embeddings=True, max_position_embeddings=8192)

if __name__ == "__main__":
    for shape in [("smollm2-135m", 9, 3, 64), ("llama-1b", 32, 8, 64), ("d128", 32, 8, 128)]:
        attention(*shape)
    decode("smollm2-135m", SMOLLM, [1, 16])
    decode("llama-1b", LLAMA_1B, [1, 16])
