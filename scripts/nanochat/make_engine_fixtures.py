#!/usr/bin/env python3
"""Golden generations from upstream nanochat's own `Engine.generate`, calculator included.

Usage:
    python scripts/nanochat/make_engine_fixtures.py /path/to/nanochat-checkout [out_dir]

Run after make_fixtures.py: it reuses that script's tokenizer (out_dir/tokenizer/tokenizer.pkl).
Needs torch (CPU), tiktoken and rustbpe. Writes, beside make_fixtures.py's outputs:

    chatsft_checkpoints/d4/model_000300.pt, meta_000300.json   a d4 that uses the calculator
    engine_golden.json                                          upstream's token columns and masks

Random weights almost never open a <|python_start|> block, so the checkpoint is trained here, as
nanochat's SFT would, on the scripted replies below until its greedy replies are exactly them.
Upstream's Engine then generates from the weights as saved, and whatever it yields is recorded:
the training only makes the calculator fire, it does not decide the golden columns.
"""

import json
import os

from upstream import fresh_model, setup

OUT = setup(__doc__)

import torch  # noqa: E402

from nanochat.checkpoint_manager import load_model, save_checkpoint  # noqa: E402
from nanochat.engine import Engine, use_calculator  # noqa: E402
from nanochat.gpt import GPTConfig  # noqa: E402
from nanochat.tokenizer import RustBPETokenizer  # noqa: E402

STEP = 300
TAG = "d4"
torch.manual_seed(2024)
torch.set_grad_enabled(False)


def call(expr):
    """A python part and, when upstream's calculator answers, its output part."""
    result = use_calculator(expr)
    parts = [{"type": "python", "text": expr}]
    return parts + ([] if result is None else [{"type": "python_output", "text": str(result)}])


def text(t):
    return {"type": "text", "text": t}


def user(t):
    return {"role": "user", "content": t}


def assistant(parts):
    return {"role": "assistant", "content": parts}


ADD = [user("What is 12+7?")], [text("Adding. "), *call("12+7"), text(" It is 19.")]

# name -> (messages, the reply the model is trained to give). "add" then "history" is the
# two-turn chat __test__/cli.spec.ts types into `kvengine chat`.
CONVERSATIONS = {
    "add": ADD,
    "two_calls_in_a_row": ([user("Work out 3*4 and then times 5")], [*call("3*4"), *call("12*5"), text(" So 60.")]),
    "count": ([user("How many r in strawberry?")], [text("Count: "), *call("'strawberry'.count('r')"), text(" three")]),
    "refused_power": ([user("What is 2 to the 10th?")], [*call("2**10"), text(" No powers here, sorry.")]),
    "commas": ([user("1,000 plus 1?")], [*call("1,000+1"), text(" ok")]),
    "division": ([user("Half of 7?")], [*call("7/2"), text(" Half.")]),
    "short": ([user("Hi")], [*call("1+1")]),
    "history": ([*ADD[0], assistant(ADD[1]), user("And 5-8?")], [text("Now "), *call("5-8"), text(" is negative.")]),
    "system": ([{"role": "system", "content": "Be brief."}, user("(2 + 3) * 4?")], [*call("(2 + 3) * 4"), text(" 20")]),
    "three_calls": ([user("Sum 1..3 step by step")], [*call("1+2"), *call("3+3"), *call("6/3"), text(" Done.")]),
}

# Each run: conversation, num_samples, max_tokens. "two_calls_in_a_row" at max_tokens 7 stops inside its first answer.
RUNS = [(name, 1, 64) for name in CONVERSATIONS] + [("add", 4, 64), ("two_calls_in_a_row", 1, 7), ("three_calls", 2, 64)]


def rendered(tok, name):
    messages, reply = CONVERSATIONS[name]
    return tok.render_conversation({"messages": [*messages, assistant(reply)]})


def prompt_of(tok, name):
    messages, reply = CONVERSATIONS[name]
    return tok.render_for_completion({"messages": [*messages, assistant(reply)]})


def train(tok):
    """nanochat's SFT objective (loss on mask-1 tokens) on the scripted replies, AdamW, full batch."""
    cfg = GPTConfig(sequence_len=256, vocab_size=tok.get_vocab_size(), n_layer=4, n_head=4, n_kv_head=2, n_embd=64, window_pattern="SSSL")
    model = fresh_model(cfg)
    rows = [rendered(tok, name) for name in CONVERSATIONS]
    width = max(len(ids) for ids, _ in rows)
    idx = torch.zeros(len(rows), width - 1, dtype=torch.long)
    targets = torch.full((len(rows), width - 1), -1, dtype=torch.long)
    for r, (ids, mask) in enumerate(rows):
        idx[r, :len(ids) - 1] = torch.tensor(ids[:-1])
        targets[r, :len(ids) - 1] = torch.tensor([t if m else -1 for t, m in zip(ids[1:], mask[1:])])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    with torch.enable_grad():
        for step in range(STEP):
            loss = model(idx, targets=targets)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 50 == 0 or step == STEP - 1:
                print(f"train step {step}: loss {loss.item():.4f}")
    meta = {"step": STEP, "val_bpb": 9.99, "model_config": cfg.__dict__, "user_config": {"note": "kvengine engine fixture: SFT on scripted calculator replies"}}
    save_checkpoint(os.path.join(OUT, "chatsft_checkpoints", TAG), STEP, model.state_dict(), None, meta)


def upstream_run(engine, tok, name, num_samples, max_tokens):
    """Upstream's columns, each row cut after its terminal token (upstream keeps yielding for it)."""
    prompt = prompt_of(tok, name)
    ends = {tok.encode_special("<|assistant_end|>"), tok.get_bos_token_id()}
    columns = list(engine.generate(prompt, num_samples=num_samples, max_tokens=max_tokens, temperature=0.0, seed=42))
    rows = []
    for r in range(num_samples):
        tokens, masks = [], []
        for column, column_masks in columns:
            tokens.append(column[r])
            masks.append(column_masks[r])
            if column[r] in ends:
                break
        rows.append({"tokens": tokens, "masks": masks})
    return {"conversation": name, "prompt": prompt, "num_samples": num_samples, "max_tokens": max_tokens, "rows": rows}


def main():
    tok = RustBPETokenizer.from_directory(os.path.join(OUT, "tokenizer"))
    train(tok)
    model, tok, _ = load_model("sft", torch.device("cpu"), phase="eval", model_tag=TAG, step=STEP)
    engine = Engine(model, tok)
    runs = [upstream_run(engine, tok, *run) for run in RUNS]
    calls = 0
    for run in runs:
        ids, _ = rendered(tok, run["conversation"])
        wanted = ids[len(run["prompt"]):][:run["max_tokens"]]
        got = run["rows"][0]["tokens"]
        print(f"{run['conversation']:>20} x{run['num_samples']}: {len(got)} tokens, {run['rows'][0]['masks'].count(0)} forced | {tok.decode(got)!r}")
        assert got == wanted, f"{run['conversation']}: the trained model strays from its script; train longer"
        calls += got.count(tok.encode_special("<|python_start|>"))
    print(f"{len(runs)} runs, {calls} calculator calls")
    with open(os.path.join(OUT, "engine_golden.json"), "w") as f:
        json.dump({"checkpoint": f"chatsft_checkpoints/{TAG}", "runs": runs,
                   "note": "nanochat Engine.generate at temperature 0, seed 42, CPU fp32"}, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
