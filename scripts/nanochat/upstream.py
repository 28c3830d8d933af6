"""What both nanochat fixture scripts do before importing upstream's code."""

import os
import sys


def setup(usage):
    """Reads `<nanochat checkout> [out_dir]` from argv (printing `usage` without them), makes
    `import nanochat` find the checkout, and points upstream at out_dir (our fixture directory by
    default) as its NANOCHAT_BASE_DIR, computing in float32. Returns out_dir."""
    if len(sys.argv) < 2:
        sys.exit(usage)
    default = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../crate/tests/fixtures/nanochat")
    out = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else default)
    os.environ["NANOCHAT_BASE_DIR"] = out
    os.environ["NANOCHAT_DTYPE"] = "float32"
    sys.path.insert(0, os.path.abspath(sys.argv[1]))
    return out


def fresh_model(cfg):
    """Upstream's GPT for `cfg` with upstream's own initialisation, built as upstream builds it
    (on the meta device, then materialised on the CPU). Call after `setup`."""
    import torch
    from nanochat.gpt import GPT

    with torch.device("meta"):
        model = GPT(cfg)
    model.to_empty(device="cpu")
    model.init_weights()
    return model
