#!/usr/bin/env python3
"""Golden fixtures for kvengine's nanochat support, computed by upstream nanochat's own code.

Usage:
    python scripts/nanochat/make_fixtures.py /path/to/nanochat-checkout [out_dir]

`out_dir` defaults to crate/tests/fixtures/nanochat. Upstream is not vendored: pass a checkout
of github.com/karpathy/nanochat (the fixtures in the repo were made at 92d63d4). Needs torch
(CPU), tiktoken and rustbpe. The output directory is laid out as a NANOCHAT_BASE_DIR, so
upstream's own `load_model` reads it back:

    tokenizer/tokenizer.pkl                       tiny tokenizer the model uses (vocab 300)
    base_checkpoints/d4/model_000005.pt           random weights, upstream's checkpoint format
    base_checkpoints/d4/model_000005.safetensors  the same weights as safetensors
    base_checkpoints/d4/meta_000005.json
    expected.json                                 token ids and windows of the golden run
    logits_{full,decode,chunked}.f32              little-endian f32, (T, vocab) row-major: GPT.forward
                                                  whole, token by token through KVCache, and in chunks
                                                  (with upstream's smear of a continuing chunk's first
                                                  token fixed, see smear_fixed_forward)
    tokenizer_corpus/tokenizer.pkl                a larger tokenizer for the corpus test
    tokenizer_corpus/corpus.json                  texts, tiktoken's ids, render_conversation

Every feature is made to matter: GQA, value embeddings with random gates, a short window
(sequence_len 256 -> 128) below the test length, non-trivial lambdas, smear and backout.
"""

import collections
import json
import os
import struct

from upstream import fresh_model, setup

OUT = setup(__doc__)

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from nanochat import gpt as upstream_gpt  # noqa: E402
from nanochat.checkpoint_manager import load_model, save_checkpoint  # noqa: E402
from nanochat.engine import KVCache  # noqa: E402
from nanochat.gpt import GPT, GPTConfig  # noqa: E402
from nanochat.tokenizer import RustBPETokenizer  # noqa: E402

STEP = 5
SEQ = 192
CHUNKS = [50, 7, 64, 1, 70]
assert sum(CHUNKS) == SEQ

torch.manual_seed(1234)
torch.set_grad_enabled(False)


def training_text(repeat):
    """A mixed-script corpus: the tokenizer needs merges inside multi-byte characters too."""
    import inspect
    import json as json_mod
    import textwrap
    samples = [
        inspect.getsource(textwrap), inspect.getsource(json_mod.decoder),
        "The quick brown fox jumps over the lazy dog. It's 2024; we've got 1,234,567 reasons.\n",
        "Größere Straßen führen über die Brücke. Ça va très bien, merci. ¿Qué tal? Привет, мир!\n",
        "日本語のテキストです。東京は大きな都市です。中文文本：你好，世界！我们今天学习。한국어 문장입니다.\n",
        "Emoji: 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇺🇸 — “quotes” and ‘single’ … ellipsis • bullets\n",
        "x = [i ** 2 for i in range(10)]  # squares\n\tif x: return {'a': 1, \"b\": 2.5e-3}\n",
        "    \n\n\n   spaces   and\ttabs\t\there\r\nCRLF lines\r\n",
        "αβγδε ∑∫√∞ ≤≥≠ ½¾ 0.5 3.14159 100% 42nd 1st 2nd\n",
    ]
    return [s for _ in range(repeat) for s in samples]


def make_tokenizer(vocab_size, directory, repeat):
    tok = RustBPETokenizer.train_from_iterator(iter(training_text(repeat)), vocab_size)
    tok.save(directory)
    return tok


def randomize(model, cfg):
    """Random weights everywhere, scaled so activations stay O(1) and every path contributes."""
    for name, p in model.named_parameters():
        if name == "resid_lambdas":
            p.copy_(torch.linspace(1.1, 0.8, cfg.n_layer))
        elif name == "x0_lambdas":
            p.copy_(torch.linspace(0.3, 0.05, cfg.n_layer))
        elif name == "smear_lambda":
            p.fill_(0.7)
        elif name == "backout_lambda":
            p.fill_(0.35)
        elif name.endswith("ve_gate.weight") or name == "smear_gate.weight":
            p.copy_(torch.randn_like(p) * 0.8)
        elif "wte" in name or "value_embeds" in name:
            p.copy_(torch.randn_like(p))
        else:
            p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5)


def write_checkpoint(tokenizer):
    cfg = GPTConfig(sequence_len=256, vocab_size=tokenizer.get_vocab_size(), n_layer=4, n_head=4, n_kv_head=2, n_embd=32, window_pattern="SSSL")
    model = fresh_model(cfg)
    randomize(model, cfg)
    # As a CUDA run saves it: an OrderedDict, embeddings in bf16, keys prefixed by torch.compile.
    state = collections.OrderedDict()
    for k, v in model.state_dict().items():
        if "wte" in k or "value_embeds" in k:
            v = v.to(torch.bfloat16)
        state["_orig_mod." + k] = v
    meta = {"step": STEP, "val_bpb": 9.99, "model_config": cfg.__dict__, "user_config": {"note": "kvengine fixture"}}
    ckpt_dir = os.path.join(OUT, "base_checkpoints", "d4")
    save_checkpoint(ckpt_dir, STEP, state, None, meta)
    # safetensors cannot hold shared storage; clone to be safe, keep bf16 as saved.
    save_file({k: v.contiguous().clone() for k, v in state.items()}, os.path.join(ckpt_dir, f"model_{STEP:06d}.safetensors"))
    return cfg


def logits_full(model, ids):
    return model.forward(torch.tensor([ids]))[0]


def logits_decode(model, cfg, ids):
    cache = KVCache(1, cfg.n_kv_head, len(ids), cfg.n_embd // cfg.n_head, cfg.n_layer, "cpu", torch.float32)
    return torch.cat([model.forward(torch.tensor([[t]]), kv_cache=cache)[0] for t in ids])


def logits_chunked(model, cfg, ids):
    cache = KVCache(1, cfg.n_kv_head, len(ids), cfg.n_embd // cfg.n_head, cfg.n_layer, "cpu", torch.float32)
    out, at = [], 0
    for n in CHUNKS:
        out.append(model.forward(torch.tensor([ids[at:at + n]]), kv_cache=cache)[0])
        at += n
    return torch.cat(out)


SMEAR_ANCHOR = "            if T > 1:\n                # Prefill: apply smear to positions 1+, same as training\n"
SMEAR_FIX = (
    "            if T > 1 and x_pre_smear is not None:\n"
    "                # kvengine: a chunk continuing a non-empty cache smears its first token too\n"
    "                gate = self.smear_lambda.to(x.dtype) * torch.sigmoid(self.smear_gate(x[:, :, :24]))\n"
    "                x = x + gate * torch.cat([x_pre_smear, x[:, :-1]], dim=1)\n"
    "            elif T > 1:\n"
)


def smear_fixed_forward():
    """Upstream's GPT.forward with one change: chunked prefill smears a chunk's first token with
    the cached previous embedding (upstream skips it, see its spec section 9). Patched at the
    source so the rest of the function is upstream's, unchanged."""
    import inspect
    import textwrap
    src = inspect.getsource(GPT.forward)
    assert SMEAR_ANCHOR in src, "upstream's smear code changed; update SMEAR_ANCHOR"
    patched = textwrap.dedent(src.replace(SMEAR_ANCHOR, SMEAR_FIX + SMEAR_ANCHOR.split("\n", 1)[1], 1))
    namespace = dict(vars(upstream_gpt))
    exec(compile(patched, "<smear-fixed forward>", "exec"), namespace)
    return namespace["forward"]


def write_f32(name, t):
    t = t.contiguous().float().numpy()
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(struct.pack(f"<{t.size}f", *t.reshape(-1).tolist()))


def model_fixture():
    tok = make_tokenizer(300, os.path.join(OUT, "tokenizer"), repeat=4)
    cfg = write_checkpoint(tok)
    model, tokenizer, _ = load_model("base", torch.device("cpu"), phase="eval")
    text = "def smear(x):\n    return x[1:] + x[:-1]  # 12345 Größe 東京 😀 " * 12
    ids = tokenizer.encode(text, prepend="<|bos|>")[:SEQ]
    assert len(ids) == SEQ, f"test text too short: {len(ids)} tokens"
    full = logits_full(model, ids)
    decode = logits_decode(model, cfg, ids)
    upstream_chunked = logits_chunked(model, cfg, ids)
    GPT.forward = smear_fixed_forward()
    chunked = logits_chunked(model, cfg, ids)
    d_decode = (decode - full).abs().max().item()
    d_chunked = (chunked - full).abs().max().item()
    d_upstream = (upstream_chunked - full).abs().max().item()
    print(f"upstream: max |decode - full| = {d_decode:.2e}, |chunked(smear fixed) - full| = {d_chunked:.2e}, "
          f"|chunked(upstream as is) - full| = {d_upstream:.2e}")
    assert d_decode < 1e-4 and d_chunked < 1e-4 and d_upstream > 1e-3
    for name, t in [("full", full), ("decode", decode), ("chunked", chunked)]:
        write_f32(f"logits_{name}.f32", t)
    expected = {
        "ids": ids,
        "chunks": CHUNKS,
        "vocab_size": cfg.vocab_size,
        "window_sizes": [w[0] for w in model.window_sizes],
        "upstream_commit_note": "logits from nanochat's GPT.forward on CPU, fp32, SDPA fallback",
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)


CORPUS = [
    "Hello, world!", "", " ", "   leading and trailing   ", "\n\n\n", "a\r\nb\rc\n", "\t\tindented\ttabs",
    "def f(x):\n    return x ** 2  # comment\n", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "<div class=\"x\">&amp; &lt;tag&gt;</div>", "{\"key\": [1, 2.5, -3e10, null, true]}",
    "1234567890 12 345 6789 3.14159 1,000,000 0x1F 1e-9", "Phone: +1 (555) 123-4567; ZIP 90210",
    "Größe, Straße, naïve café, résumé, coöperate", "Привет, как дела? Всё хорошо.", "Γειά σου Κόσμε",
    "日本語のテキストと漢字、カタカナ。", "你好，世界！今天天气很好。", "한국어 텍스트입니다", "مرحبا بالعالم", "שלום עולם",
    "😀😃😄😁 👍🏽👍🏿 👨‍👩‍👧‍👦 🇯🇵🇺🇸 ❤️‍🔥", "mixed 東京2024年😀abc", "ﬁ ligature, \u00a0nbsp, \u2003em space, \u3000ideographic",
    "zero\u200bwidth joiner\u200d and BOM \ufeff", "I'm you're he'll they've we'd it's DON'T I'LL",
    "<|bos|>", "<|user_start|>hi<|user_end|><|assistant_start|>", "text <|assistant_end|> more <|python_start|>1+1<|python_end|>",
    "<|output_start|>2<|output_end|> <|endoftext|> <|im_start|>", "<<|bos|>|> <| bos |>",
    "word" * 50, " " * 40 + "x", "!!!???...,,,;;;:::", "a\u0301e\u0301 combining accents", "\U0001F600" * 10,
    "Tab\tNewline\nReturn\rFormfeed\x0cVertical\x0b", "null\x00byte", "The end.",
]

CONVERSATIONS = [
    ({"messages": [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello! 😀"}]}, 2048),
    ({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"},
                   {"role": "user", "content": "<|assistant_end|> is plain text"}, {"role": "assistant", "content": "ok"}]}, 2048),
    ({"messages": [{"role": "user", "content": "How many r in strawberry?"},
                   {"role": "assistant", "content": [{"type": "text", "text": "Let me count. "},
                                                     {"type": "python", "text": "'strawberry'.count('r')"},
                                                     {"type": "python_output", "text": "3"},
                                                     {"type": "text", "text": "There are 3."}]}]}, 2048),
    ({"messages": [{"role": "user", "content": "long " * 40}, {"role": "assistant", "content": "cut"}]}, 20),
]


def random_texts(n):
    """Seeded strings mixing every character class the split pattern distinguishes."""
    import random
    rng = random.Random(7)
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789", " ", "  \t\n\r\n\x0b\x0c\u00a0\u2003\u3000",
        "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "éüñçßøåœ", "日本語中文한국어テキスト", "😀👍🏽👨‍👩‍👧🇯🇵❤️", "\u0301\u200b\u200d\ufeff",
        "αβγδΩπ∑√∞½", "'s 't 're 've 'm 'll 'd 'S 'LL", "<|bos|><|assistant_end|><|user_start|>",
    ]
    return ["".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(1, 60))) for _ in range(n)]


def source_excerpts():
    """Real code the tokenizer was not trained on."""
    import difflib
    import inspect
    import shlex
    return [inspect.getsource(m)[i:i + 1500] for m in (difflib, shlex) for i in range(0, 9000, 1500)]


def corpus_fixture():
    directory = os.path.join(OUT, "tokenizer_corpus")
    tok = make_tokenizer(2048, directory, repeat=8)
    enc = tok.enc
    rendered = []
    for conv, max_tokens in CONVERSATIONS:
        ids, mask = tok.render_conversation(conv, max_tokens=max_tokens)
        completion = tok.render_for_completion(conv) if conv["messages"][-1]["role"] == "assistant" else None
        rendered.append({"conversation": conv, "max_tokens": max_tokens, "ids": ids, "mask": mask, "completion": completion})
    cases = [{"text": t, "ids": enc.encode_ordinary(t)} for t in CORPUS + random_texts(300) + source_excerpts()]
    for c in cases:
        assert tok.decode(c["ids"]) == c["text"]
    specials = {name: enc.encode_single_token(name) for name in enc.special_tokens_set}
    # decode renders specials literally and invalid UTF-8 (a lone continuation byte, a cut emoji) as U+FFFD
    byte_ids = [enc.encode_single_token(bytes([b])) for b in (0xF0, 0x9F, 0x98)]
    decodes = [{"ids": ids, "text": enc.decode(ids)} for ids in (
        [specials["<|bos|>"]] + enc.encode_ordinary("hi") + [specials["<|assistant_end|>"]],
        byte_ids, [enc.encode_single_token(bytes([0x80]))] + enc.encode_ordinary("ok"),
    )]
    with open(os.path.join(directory, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump({"pat_str": enc._pat_str, "special_tokens": specials, "cases": cases, "decodes": decodes, "render": rendered}, f, ensure_ascii=False, separators=(",", ":"))
    print(f"tokenizer corpus: {len(cases)} texts, {sum(len(c['ids']) for c in cases)} tokens")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    model_fixture()
    corpus_fixture()
