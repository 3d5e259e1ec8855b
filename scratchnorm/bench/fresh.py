"""Training steps in fresh processes: a learner's script, one model on one backend per new interpreter.

The issue: a fresh python process trained ``nn.mlp([16, 64, 64, 10], norm="rmsnorm")`` on 300 rows with
Adam; on the default backend (numba) every one of its 150 steps took 34-46 ms, with ``backend="numpy"``
1.5 ms. training.py did not see it: it times both backends warm, in the bench's own process (its numba
threads, BLAS threads and caches as earlier sections left them), and its target reads the median of
paired per-step ratios and the norms' own time, never the whole step a learner waits for, nor its tail.

So here each point (a model under a load) runs as learners run it: ``python -m scratchnorm.bench.fresh
--child CONFIG`` in a new interpreter that imports scratchnorm, builds the model on one backend (its
layers, the loss and Adam alike: "numba", the default, or "numpy"; a NumPy-only process never loads
numba), draws the same seeded data, and takes up to ``STEPS`` full-batch steps (forward, loss, backward,
Adam), printing each step's seconds as JSON. The first step is not counted (kernels load from numba's
disk cache, or compile, then: first_call.py times that); every step from the second on is. The two
backends' processes are taken in turn, ``ORDER`` (numba, numpy, numpy, numba: a drift of the machine's
load over a point falls on both alike), identically seeded, their steps pooled per backend. A process
stops early once it has timed ``MIN_STEPS`` steps and spent ``BUDGET_S`` seconds (a busy machine ends).

Reported per point: p50 and p90 of each backend's steps, and numpy / numba of the p50s (``p50_ratio``)
and of the p90s (``p90_ratio``); >= 1: the default backend is no slower. The p90 because a stall that
hits one step in five leaves the median alone and still costs a learner a fifth of the run. The target
(targets.py): both ratios >= 1 at every point, quiet and with one core busy (training.busy_core).

Threads as installed: the children inherit the environment unchanged, and nothing here sets a BLAS,
OpenMP or numba thread count (the bench's ``--config`` does not reach them). The machine's load average
(os.getloadavg) is recorded before and after each condition: a "quiet" run on a machine that someone
else keeps busy is not quiet.

Models: the lessons' models of training.py (``LESSON_MODELS``) and a learner's MLPs, [16, W, W, 10] for
W in 64 and 256 with LayerNorm, RMSNorm and BatchNorm, on 300 rows of 10 classes (``LEARNER_MLPS``).

The twenty-line kernel in the learner's loop. What a learner would otherwise write is a layer of their own
around a twenty-line numba kernel (naive.py, ``prange`` over rows, as numba's documentation shows it). The
kernel grid times it alone, call after call, where its spinning OpenMP threads start at once; here it runs
where a learner runs it, between the matrix products of their training step. So at each MLP point with
LayerNorm or RMSNorm a third backend, "naive", takes its turn (``NAIVE_ORDER``): the same model with
``naive.NaiveNorm`` as its norm layers, everything else on the default backend. Reported: naive / numba of
the p50s and of the p90s (``naive_p50_ratio``, ``naive_p90_ratio``; >= 1: the default is no slower), and
a target of their own (targets.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict

import numpy as np

from .. import nn
from .training import MODELS as TRAINING_MODELS
from .training import Model, batch_of, build, busy_core

BACKENDS = ("numba", "numpy")        # the default backend first
ORDER = ("numba", "numpy", "numpy", "numba")
QUICK_ORDER = ("numba", "numpy")
NAIVE_BACKEND = "naive"              # a learner's layer around the twenty-line kernel (module docstring)
NAIVE_ORDER = ("numba", "numpy", "naive", "naive", "numpy", "numba")
QUICK_NAIVE_ORDER = ("numba", "numpy", "naive")
STEPS = 60            # steps per process; the first is not counted ...
MIN_STEPS = 10        # ... and a process stops once it has timed these and spent BUDGET_S seconds
BUDGET_S = 4.0
QUICK_STEPS, QUICK_BUDGET_S = 6, 1.0
LR = 1e-3
SEED = 0
CHILD_TIMEOUT_S = 900  # a cold numba cache compiles every kernel in the first step
LOADS = ("quiet", "one core busy")

LESSON_MODELS = tuple(m for m in TRAINING_MODELS if m.name.startswith("lesson"))
LEARNER_MLPS = tuple(Model(f"MLP 16-{w}-{w}-10", norm, "mlp", (16, w, w, 10), 300)
                     for w in (64, 256) for norm in ("layernorm", "rmsnorm", "batchnorm"))
MODELS = LESSON_MODELS + LEARNER_MLPS
QUICK_MODELS = (next(m for m in LESSON_MODELS if m.name == "lesson 16 MLP"), LEARNER_MLPS[1])   # + the issue's
FIRST_STEP_MODEL = LEARNER_MLPS[1]       # nn.mlp([16, 64, 64, 10], norm="rmsnorm") on 300 rows (first_call.py)


def takes_naive(model: Model) -> bool:
    """Does the twenty-line kernel cover this model's norm layers? (MLPs with LayerNorm or RMSNorm)"""
    from .naive import NAIVE        # here, not at the top: naive.py imports numba, which a NumPy child must not
    return model.kind == "mlp" and model.norm in NAIVE


def order_for(model: Model, quick: bool = False) -> tuple:
    """The processes of one point, in turn: with the naive backend where it covers the model."""
    if takes_naive(model):
        return QUICK_NAIVE_ORDER if quick else NAIVE_ORDER
    return QUICK_ORDER if quick else ORDER


def thread_settings() -> dict:
    """The environment variables that set thread counts (BLAS, OpenMP, numba, MKL), as this process sees them."""
    return {k: v for k, v in os.environ.items() if "THREAD" in k or k.startswith(("OMP_", "OPENBLAS_", "MKL_"))}


# -- the child: a learner's script --------------------------------------------------------------------
def child(config: dict) -> dict:
    """Build ``config["model"]`` on ``config["backend"]``, take its steps; the seconds of steps 2, 3, ..."""
    model = Model(**{**config["model"], "sizes": tuple(config["model"]["sizes"])})
    backend, seed = config["backend"], config["seed"]
    if backend == NAIVE_BACKEND:            # the learner's own norm layer, everything else on the default
        from .naive import NaiveNorm
        backend = "numba"
        net = nn.mlp(list(model.sizes), norm=lambda d: NaiveNorm(model.norm, d), seed=seed, backend=backend)
    else:
        net = build(model, backend, seed)
    x, t = batch_of(model, seed)
    ce, opt = nn.SoftmaxCrossEntropy(backend=backend), nn.Adam(net, lr=LR, backend=backend)

    def step():
        loss = ce.forward(net.forward(x), t)       # forward and loss
        net.backward(ce.backward())                # every gradient
        opt.step()                                 # Adam, in place
        return float(loss)

    t0 = time.perf_counter()
    losses = [step()]
    first_s = time.perf_counter() - t0
    times = []
    start = time.perf_counter()
    for _ in range(config["steps"] - 1):
        t0 = time.perf_counter()
        losses.append(step())
        times.append(time.perf_counter() - t0)
        if len(times) >= MIN_STEPS and time.perf_counter() - start > config["budget_s"]:
            break
    return {"pid": os.getpid(), "backend": config["backend"], "first_step_s": first_s, "steps_s": times,
            "losses": [losses[0], losses[-1]], "numba_loaded": "numba" in sys.modules,
            "thread_settings": thread_settings()}


def run_child(model: Model, backend: str, steps: int, budget_s: float, seed: int = SEED, env=None,
              timeout_s: float = CHILD_TIMEOUT_S) -> dict:
    """One process of one (model, backend): a new interpreter, the environment as it is (or ``env``), killed
    after ``timeout_s`` seconds. Adds ``process_s``: the process's wall time as its parent sees it, start-up
    and imports included."""
    config = {"model": asdict(model), "backend": backend, "steps": steps, "budget_s": budget_s, "seed": seed}
    cmd = [sys.executable, "-m", "scratchnorm.bench.fresh", "--child", json.dumps(config)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    process_s = time.perf_counter() - t0
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the fresh process for {model.name} {model.norm} (backend={backend!r}) exited with "
                           f"{proc.returncode}; its stderr ends:\n{proc.stderr[-3000:]}\nFix: run "
                           f"`{sys.executable} -m scratchnorm.bench.fresh --child '{json.dumps(config)}'` to see why.")
    return {**json.loads(lines[-1]), "process_s": process_s}


# -- the parent: points, conditions -------------------------------------------------------------------
def backend_figures(runs: list[dict]) -> dict:
    """p50, p90 and count of the pooled steps of one backend's processes, and each process's record."""
    samples = [s for r in runs for s in r["steps_s"]]
    p50, p90 = (float(v) for v in np.percentile(samples, [50, 90]))
    return {"p50_s": p50, "p90_s": p90, "steps": len(samples), "samples": samples,
            "processes": [{k: r[k] for k in ("pid", "first_step_s", "losses", "numba_loaded", "thread_settings")}
                          | {"steps": len(r["steps_s"])} for r in runs]}


def point(model: Model, order=ORDER, steps: int = STEPS, budget_s: float = BUDGET_S) -> dict:
    """One model: a process per entry of ``order``, pooled per backend; the ratios numpy / numba (and
    naive / numba when the order has the naive backend)."""
    runs = {b: [] for b in dict.fromkeys(BACKENDS + tuple(order))}
    for backend in order:
        runs[backend].append(run_child(model, backend, steps, budget_s))
    row = {"model": model.name, "norm": model.norm, "batch": model.batch,
           **{b: backend_figures(rs) for b, rs in runs.items()}}
    for other, prefix in (("numpy", ""), (NAIVE_BACKEND, "naive_")):    # p50_ratio, ..., naive_p90_ratio
        if other in row:
            for q in ("p50", "p90"):
                row[f"{prefix}{q}_ratio"] = row[other][f"{q}_s"] / row["numba"][f"{q}_s"]
    return row


def loadavg():
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def run_fresh(quick: bool = False, progress=print, models=None) -> dict:
    """Every model quiet, then every model with one core busy: {"config", "conditions", "rows"}."""
    models = models or (QUICK_MODELS if quick else MODELS)
    order, steps, budget_s = (QUICK_ORDER, QUICK_STEPS, QUICK_BUDGET_S) if quick else (ORDER, STEPS, BUDGET_S)
    conditions, rows = [], []
    for load in LOADS:
        before = loadavg()
        with busy_core() if load != "quiet" else nullcontext():
            for model in models:
                its_order = order_for(model, quick)
                progress(f"fresh processes: {model.name} {model.norm}, {load} ({', '.join(its_order)})")
                rows.append({"load": load, **point(model, its_order, steps, budget_s)})
        conditions.append({"load": load, "loadavg_before": before, "loadavg_after": loadavg()})
    return {"config": {"quick": quick, "order": list(order),
                       "naive_order": list(QUICK_NAIVE_ORDER if quick else NAIVE_ORDER), "steps": steps,
                       "min_steps": min(MIN_STEPS, steps - 1),
                       "budget_s": budget_s, "lr": LR, "seed": SEED, "thread_settings": thread_settings()},
            "conditions": conditions, "rows": rows}


def main(argv) -> int:
    if len(argv) != 2 or argv[0] != "--child":
        print("usage: python -m scratchnorm.bench.fresh --child CONFIG_JSON (the bench starts these; run "
              "`python -m scratchnorm.bench --fresh` instead)", file=sys.stderr)
        return 2
    print(json.dumps(child(json.loads(argv[1]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
