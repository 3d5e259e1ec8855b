r"""Example: a learner's RMSNorm inside a tiny Hugging Face Llama, trained through their backward.

    python -m scratchnorm.torch_bridge.llama ex/rmsnorm.py      # the file `exercises new rmsnorm ex` wrote

A two-layer Llama is built from a config (random weights, nothing downloaded). A copy of it gets the
learner's RMSNorm in place of each of its five LlamaRMSNorms (two per layer and the final one), through
``ExerciseNorm``: the learner's forward computes y, and torch hands the learner's backward dy and passes on
the dx and dweight it returns. Both models see the same tokens:

* the logits and every parameter's gradient of the next-token loss are compared, tensor by tensor, as
  max |bridged - model| / max |model| against ``TOLERANCE``: the learner's float32 NumPy and torch's float32
  round differently (np.sqrt and a division against torch's rsqrt, another summation order), so a right
  backward agrees to float32 rounding, a few 1e-7 relative, carried through the layers; a wrong one is off
  by far more;
* both are then trained a few steps of SGD side by side, and the losses printed.

When a tensor is off, the exercise checker runs on the learner's file and names the mistake
(``scratchnorm.exercises.check``). The exit code is 0 when everything agrees.
"""
from __future__ import annotations

import argparse
import copy
import sys

import torch

from ..exercises import check
from . import ExerciseNorm, exercise_functions, replace_modules

CONFIG = dict(vocab_size=96, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-5, tie_word_embeddings=False)
# max |bridged - model| / max |model| per tensor: the logits, and each parameter's gradient. A right
# learner's float32 NumPy measured 2.8e-7 (logits) and 4.7e-7 (the worst of 21 gradients) here, a few
# float32 epsilons (1.2e-7); a missing term of the backward moves the gradients by 1e-1.
TOLERANCE = {"logits": 1e-5, "gradient": 1e-5}


def is_rmsnorm(module) -> bool:
    return type(module).__name__ == "LlamaRMSNorm"


def tiny_llama(seed: int = 0):
    """A Llama from CONFIG with random weights (float32, eager attention); the norms' weights drawn around
    1 (their init is exactly 1, which would hide a dweight or a weight left out)."""
    from transformers import LlamaConfig, LlamaForCausalLM     # the compare extra
    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**CONFIG, attn_implementation="eager")).float()
    with torch.no_grad():
        for module in model.modules():
            if is_rmsnorm(module):
                module.weight.copy_(1 + 0.1 * torch.randn_like(module.weight))
    return model


def with_learners_norms(model, source, exercise: str = "rmsnorm"):
    """A copy of ``model`` whose RMSNorms are the learner's (``source``: their file, module or dict), with
    the same weights and eps. Returns (the copy, the names replaced, the learner's functions)."""
    name, functions, _ = exercise_functions(source, exercise)
    bridged = copy.deepcopy(model)

    def learners(norm):
        mine = ExerciseNorm(functions, norm.weight.shape[0], eps=norm.variance_epsilon, exercise=name)
        with torch.no_grad():
            mine.weight.copy_(norm.weight)
        return mine

    return bridged, replace_modules(bridged, is_rmsnorm, learners), functions


def tokens(seed: int = 1, batch: int = 4, length: int = 16) -> torch.Tensor:
    return torch.randint(0, CONFIG["vocab_size"], (batch, length), generator=torch.Generator().manual_seed(seed))


def relative_errors(model, bridged, ids) -> dict:
    """{"logits": e, parameter name: e, ...}: e = max |bridged - model| / max |model| for that tensor, the
    gradients those of the next-token loss on ``ids``."""
    out = {}
    for m in (model, bridged):
        m.zero_grad()
        out[m] = m(input_ids=ids, labels=ids)
        out[m].loss.backward()
    errors = {"logits": _relative(out[bridged].logits, out[model].logits)}
    grads = dict(bridged.named_parameters())
    for name, p in model.named_parameters():
        errors[name] = _relative(grads[name].grad, p.grad)
    return errors


def _relative(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got - want).detach().abs().max() / want.detach().abs().max())


def failing(errors: dict) -> list[str]:
    """The tensors past their TOLERANCE."""
    return [k for k, e in errors.items() if not e <= TOLERANCE["logits" if k == "logits" else "gradient"]]


def train_side_by_side(model, bridged, ids, steps: int = 5, lr: float = 0.1) -> list[tuple[float, float]]:
    """SGD on both from the same weights; the (model, bridged) losses before each step."""
    opts = [torch.optim.SGD(m.parameters(), lr=lr) for m in (model, bridged)]
    losses = []
    for _ in range(steps):
        step = []
        for m, opt in zip((model, bridged), opts):
            opt.zero_grad()
            loss = m(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            step.append(loss.item())
        losses.append(tuple(step))
    return losses


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scratchnorm.torch_bridge.llama",
                                 description="A learner's RMSNorm backward inside a tiny Hugging Face Llama.")
    ap.add_argument("file", metavar="FILE", help="the learner's rmsnorm.py (`exercises new rmsnorm` wrote it)")
    ap.add_argument("--steps", type=int, default=5, help="SGD steps side by side (default 5)")
    args = ap.parse_args(argv)
    model = tiny_llama()
    bridged, names, functions = with_learners_norms(model, args.file)
    ids = tokens()
    print(f"tiny Llama ({CONFIG['num_hidden_layers']} layers, d = {CONFIG['hidden_size']}), float32: "
          f"{len(names)} RMSNorms are the learner's ({', '.join(names)})")
    errors = relative_errors(model, bridged, ids)
    bad = failing(errors)
    worst = max((k for k in errors if k != "logits"), key=errors.get)
    print(f"  logits          max rel err {errors['logits']:.1e}   (tolerance {TOLERANCE['logits']:.0e})")
    print(f"  {len(errors) - 1} gradients   worst {errors[worst]:.1e} ({worst})   "
          f"(tolerance {TOLERANCE['gradient']:.0e})")
    for k in bad:
        print(f"  OFF  {k}: {errors[k]:.1e}")
    print("  SGD steps, loss of the model and of the learner's:")
    for i, (a, b) in enumerate(train_side_by_side(model, bridged, ids, args.steps)):
        print(f"    step {i}: {a:.5f}  {b:.5f}")
    if not bad:
        print("the learner's RMSNorm trains the Llama as torch's does.")
        return 0
    print(f"{len(bad)} tensors differ; the exercise checker on the learner's functions says:")
    print(check("rmsnorm", functions, source=args.file))
    return 1


if __name__ == "__main__":
    sys.exit(main())
