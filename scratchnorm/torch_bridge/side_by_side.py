r"""A model with torch's norms and its copy with the learner's, side by side: what is compared, and how
(the worked examples gpt2.py and resnet.py).

Every comparison is per case: a tensor is split along its first axis (one token's logits, one output unit's
weights, one channel; a vector into its elements), and each case's error is

    e = max |bridged - model| / scale,   scale = max(max |model| over the case, FLOOR * max |model| over the tensor)

checked against the example's tolerance for that kind of tensor, case by case. The floor is for the cases
that are zero in exact arithmetic and round-off in float64: GPT-2's key biases get no gradient (softmax
ignores a shift shared by all of a query's scores), and the model computes 1e-22 for them where the tensor's
largest is 1e-2; against their own scale, two right computations differ by 100%. A case that is exactly zero
in a tensor that is exactly zero must be exactly zero in the bridged one: e = 0, else inf.
Comparison.error is the worst case's e, and Comparison.case says which case it is.
"""
from __future__ import annotations

from dataclasses import dataclass

import copy

import numpy as np
import torch

from . import learner_contract, learner_norm, replace_modules

FLOOR = 1e-6      # a case's scale is at least this share of its tensor's largest value (module docstring)
# float64, both examples: the worst case's e a right CS231n learner measured is 3e-15 to 4e-13 (each example's
# module says which); a wrong one's moves the gradients by 1e-1
TOLERANCE = {"output": 1e-10, "loss": 1e-10, "gradient": 1e-9, "parameter": 1e-9, "buffer": 1e-9}


def jitter_affine(model, is_norm) -> None:
    """The weights of the norms (``is_norm(module)``) drawn around 1 and their biases around 0, in place:
    their init, exactly 1 and 0, would hide a dgamma or a gamma left out. Draws from torch's global seed."""
    with torch.no_grad():
        for module in model.modules():
            if is_norm(module):
                module.weight.copy_(1 + 0.1 * torch.randn_like(module.weight))
                module.bias.copy_(0.1 * torch.randn_like(module.bias))


def with_learners_norms(model, source, exercise: str, is_norm):
    """A copy of ``model`` whose norms (``is_norm(module)``) are the learner's (``source``: their file, module
    or dict), with the same weights, eps and, for BatchNorm, momentum and running averages. Returns (the copy,
    the names replaced, the learner's contract)."""
    contract = learner_contract(source, exercise)
    bridged = copy.deepcopy(model)
    return bridged, replace_modules(bridged, is_norm, lambda norm: learner_norm(contract, norm)), contract


@dataclass
class Comparison:
    kind: str        # "output", "loss", "gradient", "parameter", "buffer": each kind has its tolerance
    name: str        # the tensor: "logits", "step 2", a parameter's or a buffer's name
    error: float     # the worst case's e (module docstring)
    case: int        # which case (the index along the first axis)


def case_errors(got: torch.Tensor, want: torch.Tensor) -> np.ndarray:
    """e of every case (module docstring): (cases,)."""
    g, w = (t.detach().cpu().double().numpy() for t in (got, want))
    g, w = (a.reshape(a.shape[0], -1) if a.ndim else a.reshape(1, 1) for a in (g, w))   # (cases, values)
    diff, scale = np.abs(g - w).max(axis=1), np.abs(w).max(axis=1)
    scale = np.maximum(scale, FLOOR * scale.max())
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(scale > 0, diff / scale, np.where(diff > 0, np.inf, 0.0))


def compare(kind: str, name: str, got: torch.Tensor, want: torch.Tensor) -> Comparison:
    e = case_errors(got, want)
    return Comparison(kind, name, float(e.max()), int(e.argmax()))


def one_step(model, bridged, run) -> list[Comparison]:
    """The output, the loss and every parameter's gradient of one forward and backward of each model:
    ``run(m)`` -> (loss, output) on the same batch."""
    got = {}
    for m in (model, bridged):
        m.zero_grad()
        loss, output = run(m)
        loss.backward()
        got[m] = loss, output
    out = [compare("output", "output", got[bridged][1], got[model][1]),
           compare("loss", "loss", got[bridged][0], got[model][0])]
    mine = dict(bridged.named_parameters())
    return out + [compare("gradient", name, mine[name].grad, p.grad) for name, p in model.named_parameters()]


def train(model, bridged, run, steps: int, lr: float) -> tuple[np.ndarray, list[Comparison]]:
    """``steps`` of SGD on each from the same weights, on the same batch: (losses (steps, 2), the model's and
    the bridged's before each step; the comparisons of each step's loss, then of every parameter and buffer
    after the last step)."""
    opts = [torch.optim.SGD(m.parameters(), lr=lr) for m in (model, bridged)]
    losses = np.zeros((steps, 2))
    for step in range(steps):
        for j, (m, opt) in enumerate(zip((model, bridged), opts)):
            opt.zero_grad()
            loss = run(m)[0]
            loss.backward()
            opt.step()
            losses[step, j] = loss.item()
    out = [compare("loss", f"loss at step {s}", torch.tensor(b), torch.tensor(a)) for s, (a, b) in enumerate(losses)]
    for kind, named in (("parameter", "named_parameters"), ("buffer", "named_buffers")):
        mine = dict(getattr(bridged, named)())
        out += [compare(kind, name, mine[name], t) for name, t in getattr(model, named)()
                if t.is_floating_point()]
    return losses, out


def failing(comparisons: list[Comparison], tolerance: dict) -> list[Comparison]:
    """The comparisons past their kind's tolerance."""
    return [c for c in comparisons if not c.error <= tolerance[c.kind]]


def summary(comparisons: list[Comparison], tolerance: dict) -> list[str]:
    """One line per kind: how many tensors, the worst case's e and where, against the tolerance."""
    lines = []
    for kind in dict.fromkeys(c.kind for c in comparisons):
        these = [c for c in comparisons if c.kind == kind]
        worst = max(these, key=lambda c: c.error)
        lines.append(f"  {kind:<10} {len(these):>3} tensors, worst case e = {worst.error:.1e} ({worst.name}, case "
                     f"{worst.case})   tolerance {tolerance[kind]:.0e}")
    return lines


def report(comparisons, losses, tolerance: dict, contract, source, what: str) -> int:
    """Print the comparisons by kind and the losses, and, when a tensor is off, the exercise checker's report
    on the learner's functions, whose code names the mistake. 0 when everything agrees, else 1."""
    from . import checker_report
    print("\n".join(summary(comparisons, tolerance)))
    print("  SGD steps, loss of the model and of the learner's:")
    for i, (a, b) in enumerate(losses):
        print(f"    step {i}: {a:.6f}  {b:.6f}")
    bad = failing(comparisons, tolerance)
    if not bad:
        print(f"the learner's {what} as torch's does.")
        return 0
    for c in bad[:8]:
        print(f"  OFF  {c.kind} {c.name}: e = {c.error:.1e} (case {c.case})")
    verdict = checker_report(contract, source)
    print(f"{len(bad)} tensors differ; the exercise checker on the learner's functions says "
          f"{', '.join(verdict.diagnoses)}:")
    print(verdict)
    return 1
