"""Whole training steps of the lessons' own models: where a learner runs the norms.

A kernel timed alone on a quiet machine says little about a training loop: there
the norm runs between matrix products, whose BLAS threads want both cores, and
beside whatever else the machine does. This section times one training step
(forward, loss, backward, Adam) of each model below, median over ``STEPS`` steps,
with the default backend ("numba") and ``backend="numpy"`` taken in turn, then
PyTorch eager on the same MLP when torch is installed (apart: its thread pool spins
between its calls and would slow the others). BLAS threads stay as the user has them. It runs
once quiet and once with one core kept busy by another process (``busy_core``),
and reports the norm layers' share of the numba step and their own time per step
on each backend (their forward and backward, timed inside the step: what the
backend changes, less noisy than the whole step, whose matrix products stall
when BLAS's threads miss a core).

Paired steps. With one core busy a matrix product stalls at random, a few milliseconds at a time,
and a median over steps lands on the stalled or the unstalled steps by chance: the same model's
step medians moved by 2x between runs, either way. The numba and numpy steps are taken in turn (the
order alternating), so step i of one and step i of the other saw the same machine; the ratio of the
two backends is the median over i of numpy_i / numba_i (``paired_ratio``). A pair in which neither
stalled gives the backends' own ratio, and one in which both did a ratio on the same side of 1 (the
same stall added to both); such pairs are the majority whatever the stall rate (p^2 + (1 - p)^2 >=
1/2), so the median of the ratios is on the side of 1 the backends are, which is what the target reads.

Models (MODELS): lesson 10's MLP (10 hidden layers of 64, batches of 128),
lesson 16's (4 of 64), the BatchNorm MLP, lesson 12's Transformer (d 48, 2
blocks, 4 heads, 16 tokens, batches of 32), and larger versions of the MLP and
the Transformer.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np

from .. import nn
from ..layer import Layer
from ..nn.norms import NORMS

STEPS = 40          # timed steps per model and backend (after WARM_UP) ...
MIN_STEPS = 5       # ... or fewer, at least these, once BUDGET_S seconds are spent (a busy machine)
BUDGET_S = 3.0
WARM_UP = 3


@dataclass(frozen=True)
class Model:
    name: str           # "lesson 10 MLP"
    norm: str           # a name of nn.NORMS
    kind: str           # "mlp" or "transformer"
    sizes: tuple        # mlp: the layer sizes; transformer: (vocab, d_model, heads, layers, tokens)
    batch: int


MODELS = (
    Model("lesson 10 MLP", "layernorm", "mlp", (2,) + (64,) * 10 + (3,), 128),
    Model("lesson 10 MLP", "rmsnorm", "mlp", (2,) + (64,) * 10 + (3,), 128),
    Model("lesson 10 MLP", "prmsnorm", "mlp", (2,) + (64,) * 10 + (3,), 128),
    Model("lesson 10 MLP", "batchnorm", "mlp", (2,) + (64,) * 10 + (3,), 128),
    Model("lesson 16 MLP", "rmsnorm", "mlp", (2,) + (64,) * 4 + (3,), 128),
    Model("lesson 12 Transformer", "rmsnorm", "transformer", (64, 48, 4, 2, 16), 32),
    Model("lesson 12 Transformer", "layernorm", "transformer", (64, 48, 4, 2, 16), 32),
    Model("MLP 4x512", "layernorm", "mlp", (64,) + (512,) * 4 + (10,), 512),
    Model("MLP 4x512", "rmsnorm", "mlp", (64,) + (512,) * 4 + (10,), 512),
    Model("Transformer d256", "rmsnorm", "transformer", (256, 256, 8, 2, 64), 16),
)
QUICK_MODELS = MODELS[:2] + MODELS[5:6]


def build(model: Model, backend: str, seed: int = 0):
    if model.kind == "mlp":
        return nn.mlp(list(model.sizes), norm=model.norm, seed=seed, backend=backend)
    vocab, d, heads, layers, tokens = model.sizes
    return nn.Transformer(vocab, d, heads, layers, tokens, norm=model.norm, seed=seed, backend=backend)


def batch_of(model: Model, seed: int = 0):
    """(inputs, targets) of one batch: points and classes for an MLP, token ids for a Transformer."""
    rng = np.random.default_rng(seed)
    if model.kind == "mlp":
        return rng.standard_normal((model.batch, model.sizes[0])), rng.integers(0, model.sizes[-1], model.batch)
    vocab, tokens = model.sizes[0], model.sizes[4]
    ids = rng.integers(0, vocab, (model.batch, tokens + 1))
    return ids[:, :-1], ids[:, 1:]


def norm_layers(layer: Layer) -> list[Layer]:
    """Every normalization layer inside a model (the classes of nn.NORMS)."""
    kinds = tuple(k for k in NORMS.values() if isinstance(k, type))
    found = [layer] if isinstance(layer, kinds) else []
    for child in getattr(layer, "children", {}).values():
        found += norm_layers(child)
    return found


class NormClock:
    """Seconds spent in the norm layers' forward and backward: their methods wrapped, per instance."""

    def __init__(self, layers):
        self.seconds = 0.0
        for layer in layers:
            for method in ("forward", "backward"):
                setattr(layer, method, self._timed(getattr(layer, method)))

    def _timed(self, fn):
        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0
        return timed


def stepper(model: Model, backend: str):
    """A function doing one training step of a fresh ``model`` on ``backend`` (it returns the loss before the
    step), and the clock of its norms."""
    net = build(model, backend)
    x, t = batch_of(model)
    ce, opt = nn.SoftmaxCrossEntropy(), nn.Adam(net, lr=1e-3)
    clock = NormClock(norm_layers(net))

    def step():
        loss = ce.forward(net.forward(x), t)
        net.backward(ce.backward())
        opt.step()
        return loss
    return step, clock


def time_steps(steps: dict, clocks: dict, n: int = STEPS, budget_s: float = BUDGET_S) -> dict:
    """Median seconds of a step of each of ``steps`` (name -> function), the steps taken in turn (so that
    each sees the same machine), and each norm clock's share of its summed step time."""
    samples = {name: [] for name in steps}
    names = list(steps)
    start = time.perf_counter()
    for i in range(WARM_UP + n):
        if i == WARM_UP:
            for clock in clocks.values():
                clock.seconds = 0.0
        for name in names[i % len(names):] + names[:i % len(names)]:      # the order alternates
            step = steps[name]
            t0 = time.perf_counter()
            step()
            if i >= WARM_UP:
                samples[name].append(time.perf_counter() - t0)
        if i >= WARM_UP + MIN_STEPS and time.perf_counter() - start > budget_s:
            break
    return {name: {"median_s": statistics.median(s),
                   "norm_share": clocks[name].seconds / sum(s) if name in clocks else None,
                   "norm_s": clocks[name].seconds / len(s) if name in clocks else None,
                   "samples": s}
            for name, s in samples.items()}


def paired_ratio(slow: list, fast: list) -> float:
    """The median over the steps taken together of slow_i / fast_i (see "Paired steps" above)."""
    return statistics.median(a / b for a, b in zip(slow, fast))


def torch_stepper(model: Model, torch):
    """One training step of the same MLP in PyTorch eager (float64, as the library's default); None for a
    Transformer or a norm torch.nn lacks."""
    tnn = torch.nn
    norms = {"layernorm": tnn.LayerNorm, "rmsnorm": tnn.RMSNorm, "batchnorm": tnn.BatchNorm1d}
    if model.kind != "mlp" or model.norm not in norms:
        return None
    layers = []
    for i, (n_in, n_out) in enumerate(zip(model.sizes[:-1], model.sizes[1:])):
        norm = model.norm == "batchnorm"
        layers.append(tnn.Linear(n_in, n_out, bias=not (norm and i < len(model.sizes) - 2)))
        if i < len(model.sizes) - 2:
            layers += [norms[model.norm](n_out), tnn.ReLU()]
    net = tnn.Sequential(*layers).double()
    x, t = batch_of(model)
    x, t = torch.from_numpy(x), torch.from_numpy(t)
    opt, loss_fn = torch.optim.Adam(net.parameters(), lr=1e-3), tnn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(net(x), t).backward()
        opt.step()
    return step


@contextmanager
def busy_core():
    """Another process keeps one core busy (a Python loop) for the duration."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        yield
    finally:
        proc.kill()
        proc.wait()


def run_training(torch=None, quick: bool = False, progress=print) -> list[dict]:
    """One row per model, backend and load ("quiet", "one core busy")."""
    rows = []
    models = QUICK_MODELS if quick else MODELS
    steps = 10 if quick else STEPS
    for load in ("quiet", "one core busy"):
        with busy_core() if load != "quiet" else nullcontext():
            for model in models:
                progress(f"training step: {model.name} {model.norm}, {load}")
                built = {backend: stepper(model, backend) for backend in ("numba", "numpy")}
                fns = {backend: fn for backend, (fn, _) in built.items()}
                budget = 0.3 if quick else BUDGET_S
                timed = time_steps(fns, {backend: clock for backend, (_, clock) in built.items()}, steps, budget)
                timed["numba"]["paired_ratio"] = paired_ratio(timed["numpy"]["samples"], timed["numba"]["samples"])
                torch_step = torch_stepper(model, torch) if torch is not None else None
                if torch_step is not None:      # apart: torch's threads spin between its calls
                    timed.update(time_steps({"torch": torch_step}, {}, steps, budget))
                for backend, t in timed.items():
                    rows.append({"model": model.name, "norm": model.norm, "batch": model.batch, "load": load,
                                 "backend": backend, **t})
    return rows
