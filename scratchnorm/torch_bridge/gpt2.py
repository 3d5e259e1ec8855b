r"""Example: a learner's LayerNorm inside a tiny Hugging Face GPT-2, trained through their backward.

    python -m scratchnorm.torch_bridge.gpt2 layers.py            # CS231n's layernorm_forward / _backward
    python -m scratchnorm.torch_bridge.gpt2 ex/layernorm.py      # or the stub of `exercises new layernorm`

A two-layer GPT-2 is built from a config (random weights, nothing downloaded, dropout off, float64). A copy
of it gets the learner's LayerNorm in place of each of its five torch.nn.LayerNorms (ln_1 and ln_2 of each
block, and ln_f), read in the contract the exercise checker reads the file in (``learner_contract``; the
cache contract's (N, D) function gets the (batch, tokens, d) activations as (batch * tokens, d)). Both
models see the same tokens, and side_by_side.py compares them case by case (one token's logits, one output
unit's gradient): one forward and backward, then ``--steps`` of SGD, each step's loss and every parameter
after the last.

float64 throughout, so that the comparison measures the learner's maths, not float32's rounding: a right
learner's NumPy and torch's differ by summation order alone (``TOLERANCE``). When a tensor is off, the
exercise checker runs on the learner's file and names the mistake. The exit code is 0 when everything agrees.
"""
from __future__ import annotations

import argparse
import sys

import torch

from . import side_by_side
from .side_by_side import TOLERANCE, jitter_affine, one_step, report, train

CONFIG = dict(vocab_size=96, n_positions=32, n_embd=32, n_inner=64, n_layer=2, n_head=4, layer_norm_epsilon=1e-5,
              resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
# the worst case's e (side_by_side.py) a right CS231n learner measured here, float64: 3e-15 (logits),
# 1e-14 (loss), 2e-13 (the gradients), after 5 steps of SGD 3e-16 (losses), 2e-15 (parameters); a missing
# mean term of the backward moves the gradients by 1e-1. (TOLERANCE: side_by_side.py)
LR = 0.1


def is_layernorm(module) -> bool:
    return isinstance(module, torch.nn.LayerNorm)


def tiny_gpt2(seed: int = 0):
    """A GPT-2 from CONFIG with random weights (float64, eager attention); the LayerNorms' weights drawn
    around 1 and their biases around 0 (their init, exactly 1 and 0, would hide a dgamma or a gamma left out)."""
    from transformers import GPT2Config, GPT2LMHeadModel     # the compare extra
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(**CONFIG, attn_implementation="eager")).double()
    jitter_affine(model, is_layernorm)
    return model


def with_learners_norms(model, source, exercise: str = "layernorm"):
    """A copy of ``model`` whose LayerNorms are the learner's (``source``: their file, module or dict), with
    the same weights and eps. Returns (the copy, the names replaced, the learner's contract)."""
    return side_by_side.with_learners_norms(model, source, exercise, is_layernorm)


def tokens(seed: int = 1, batch: int = 4, length: int = 16) -> torch.Tensor:
    return torch.randint(0, CONFIG["vocab_size"], (batch, length), generator=torch.Generator().manual_seed(seed))


def runner(ids):
    """run(model) -> (the next-token loss on ``ids``, the logits flattened to one row per token)."""
    def run(model):
        out = model(input_ids=ids, labels=ids)
        return out.loss, out.logits.reshape(-1, out.logits.shape[-1])       # (batch * tokens, vocab)
    return run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scratchnorm.torch_bridge.gpt2",
                                 description="A learner's LayerNorm inside a tiny Hugging Face GPT-2.")
    ap.add_argument("file", metavar="FILE", help="the learner's file: layernorm_forward and layernorm_backward "
                    "(CS231n's), or the stub of `exercises new layernorm`")
    ap.add_argument("--steps", type=int, default=5, help="SGD steps side by side (default 5)")
    args = ap.parse_args(argv)
    model = tiny_gpt2()
    bridged, names, contract = with_learners_norms(model, args.file)
    run = runner(tokens())
    print(f"tiny GPT-2 ({CONFIG['n_layer']} layers, d = {CONFIG['n_embd']}), float64: {len(names)} LayerNorms are "
          f"the learner's, in {contract.text()}")
    comparisons = one_step(model, bridged, run)
    losses, trained = train(model, bridged, run, args.steps, LR)
    return report(comparisons + trained, losses, TOLERANCE, contract, args.file, "LayerNorm trains the GPT-2")


if __name__ == "__main__":
    sys.exit(main())
