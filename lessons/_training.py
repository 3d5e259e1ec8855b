"""What the training lessons (10, 11, 12) share: the training step, a fair race, timing, one BLAS thread.

The training step is the one from ``scratchnorm.nn``'s docstring::

    loss = ce.forward(model.forward(x), target)     # forward and loss
    model.backward(ce.backward())                   # every gradient, by hand
    opt.step()                                      # Adam updates the parameters in place

``race`` trains several models on the SAME batches, one step of each in
turn (the order rotates every step), and times every step on its own. On a
shared, noisy machine a slow second slows every model alike, so the per-step
times stay comparable; a curve's wall-clock axis is the sum of that model's
own step times (evaluation is not counted). Comparable is not exact: on the
shared 2-core machine these lessons were written on, the ratio of two
models' median step times still moved by up to 10% between runs.

One BLAS thread. The models are small: their matrix products take tens of
microseconds, and OpenBLAS's threads cost more to wake and synchronize than
they save, several times more on a loaded 2-core machine (a first profile
of a 12-layer MLP: 36 ms a step with the default threads, 2.7 ms with one).
``one_blas_thread()`` sets NumPy's OpenBLAS to one thread for the lesson
and restores the previous count afterwards, and numba's parallel kernels
too: from a few hundred rows on they split the rows over threads, and on a
busy 2-core machine waking the second thread cost lesson 12 ten times the
CPU time of a step (112 ms against 10.5 ms with one thread, measured while
other work ran). The kernels' fixed chunks give the same bits with one
thread or two, so only the time changes.
"""
from __future__ import annotations

import contextlib
import ctypes
import time
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from lessons._common import VERDICTS
from lessons._stats import mean_interval, geometric_interval
from lessons._style import color
from scratchnorm import nn

#: colour, label and line style of each run, the same in every figure (RMSNorm blue, LayerNorm orange as in 02)
STYLE = {"none": (color("none"), "no norm", "-"), "batchnorm": (color("batchnorm"), "BatchNorm", "-"),
         "layernorm": (color("layernorm"), "LayerNorm", "-"), "rmsnorm": (color("rmsnorm"), "RMSNorm", "-"),
         "prmsnorm": (color("prmsnorm"), "pRMSNorm (p = 6.25%)", "-"), "dyt": (color("dyt"), "DyT (α0 = 0.5)", "-"),
         "shallow": ("0.1", "LayerNorm, 2 hidden layers", ":")}


def expect(lesson, verdict):
    """What a comparison claim is expected to give: ``verdict`` in a full run; anything in a quick
    run, which trains too briefly for a comparison to mean something (it checks that the lesson runs)."""
    return VERDICTS if lesson.quick else verdict


def _openblas():
    """(set, get) of the OpenBLAS that NumPy's wheel bundles, or None (another BLAS)."""
    libs = sorted((Path(np.__file__).parent.parent / "numpy.libs").glob("libscipy_openblas*"))
    for path in libs:
        lib = ctypes.CDLL(str(path))
        for suffix in ("64_", ""):
            setter = getattr(lib, f"scipy_openblas_set_num_threads{suffix}", None)
            getter = getattr(lib, f"scipy_openblas_get_num_threads{suffix}", None)
            if setter is not None and getter is not None:
                return setter, getter
    return None


@contextlib.contextmanager
def one_blas_thread():
    """Run the block with NumPy's OpenBLAS and numba's parallel kernels on one thread each; yields whether
    OpenBLAS's count could be set."""
    import numba
    blas = _openblas()
    setter, getter = blas if blas is not None else (lambda n: None, lambda: None)
    before, numba_before = getter(), numba.get_num_threads()
    setter(1)
    numba.set_num_threads(1)
    try:
        yield blas is not None
    finally:
        numba.set_num_threads(numba_before)
        if before is not None:
            setter(before)


def paired(a, b) -> tuple[float, float, float]:
    """(mean, low, high) of the per-seed differences a[s] - b[s] (same seed, same data): a 95% interval."""
    return mean_interval(np.subtract(a, b))


def interval(m, lo, hi, fmt="{:.3f}", n=None) -> str:
    """'0.012 [−0.004, 0.028], 3 seeds' (one seed: just the value)."""
    if lo == hi:
        return fmt.format(m) + " (1 seed: no interval)"
    return f"{fmt.format(m)} [{fmt.format(lo)}, {fmt.format(hi)}]" + (f", {n} seeds" if n else "")


def report(lesson, line: str) -> None:
    """A line of measurements, printed when the lesson runs alone (the runner prints one line a lesson)."""
    if lesson.verbose:
        print(line)


def train_step(model, ce, opt, x, target) -> float:
    """One step of training; returns the loss on this batch."""
    loss = ce.forward(model.forward(x), target)
    model.backward(ce.backward())
    opt.step()
    return float(loss)


@dataclass
class Curve:
    """One model's race: the evaluated loss at ``steps``, the seconds of training until then."""

    steps: list = field(default_factory=list)
    seconds: list = field(default_factory=list)
    loss: list = field(default_factory=list)
    step_times: list = field(default_factory=list)   # seconds of every training step

    @property
    def step_time(self) -> float:
        """The median seconds of one step (a median: a hiccup of the machine does not count)."""
        return float(np.median(self.step_times))


def warm_up(models, x, target) -> None:
    """One forward and backward of each of ``models`` (throwaway models built like the raced ones),
    so that loading or compiling the numba kernels happens before the clock runs."""
    ce = nn.SoftmaxCrossEntropy()
    for model in models:
        ce.forward(model.forward(x), target)
        model.backward(ce.backward())


def race(runs: dict, batches, evaluate, every: int, schedules=None) -> dict:
    """Train ``runs`` {name: (model, optimizer)} on the same ``batches`` [(x, target), ...].

    ``evaluate(model) -> loss`` runs in eval mode every ``every`` steps, at step 0 and at the
    end; ``schedules`` {name: f(step) -> lr} (optional) sets a run's learning rate of step 1, 2, ...
    Returns {name: Curve}.
    """
    ce, names = nn.SoftmaxCrossEntropy(), list(runs)
    curves = {name: Curve() for name in names}

    def record(step):
        for name, (model, _) in runs.items():
            c = curves[name]
            c.steps.append(step)
            c.seconds.append(float(np.sum(c.step_times)))
            model.eval()
            c.loss.append(evaluate(model))
            model.train()

    record(0)
    for step, (x, target) in enumerate(batches, 1):
        for name in names[step % len(names):] + names[:step % len(names)]:
            model, opt = runs[name]
            if schedules is not None:
                opt.lr = schedules[name](step)
            start = time.perf_counter()
            train_step(model, ce, opt, x, target)
            curves[name].step_times.append(time.perf_counter() - start)
        if step % every == 0 or step == len(batches):
            record(step)
    return curves


def interleaved_medians(fns: dict, repeats: int) -> dict:
    """{name: median seconds of fns[name]()}, the calls interleaved so that noise hits all alike."""
    for fn in fns.values():
        fn()                                          # warm-up (compilation, caches)
    times = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t)) for name, t in times.items()}


def seed_mean(curves: list[Curve]):
    """Steps, mean seconds, mean loss, min and max loss over seeds (curves evaluated at the same steps)."""
    loss = np.array([c.loss for c in curves])
    return (np.array(curves[0].steps), np.mean([c.seconds for c in curves], axis=0), loss.mean(axis=0),
            loss.min(axis=0), loss.max(axis=0))


def plot_race(ax_steps, ax_seconds, curves: dict, ylabel: str) -> None:
    """Loss against steps (left) and against wall-clock seconds (right): {norm: [Curve per seed]}."""
    for name, runs in curves.items():
        color, label, ls = STYLE[name]
        steps, seconds, mean, low, high = seed_mean(runs)
        if len(runs) > 1:
            ax_steps.fill_between(steps, low, high, color=color, alpha=0.12, linewidth=0)
        ax_steps.plot(steps, mean, color=color, ls=ls, label=label)
        ax_seconds.plot(seconds, mean, color=color, ls=ls, label=label)
    ax_steps.set(xlabel="training step", ylabel=ylabel)
    ax_seconds.set(xlabel="wall-clock seconds of training (sum of the model's own steps)", ylabel=ylabel)


# -- shared by the training lessons: data, accuracy, time to a loss, and two figures --
def spirals(n, rng, classes=3, turns=2.0, noise=0.03):
    """n points on ``classes`` interleaved spirals; the label is the arm."""
    arm = rng.integers(0, classes, n)
    r = np.sqrt(rng.uniform(0.02, 1.0, n))                    # uniform over the disc
    theta = 2 * np.pi * (turns * r + arm / classes)
    x = r[:, None] * np.c_[np.cos(theta), np.sin(theta)] + noise * rng.standard_normal((n, 2))
    return 2 * x, arm


def accuracy(model, x, y):
    model.eval()
    acc = float(np.mean(model.forward(x).argmax(axis=1) == y))
    model.train()
    return acc


def time_to(seconds, loss, target):
    """The first time the curve reaches ``target`` (linear between evaluations), inf if never."""
    below = np.flatnonzero(loss <= target)
    if below.size == 0:
        return np.inf
    i = below[0]
    if i == 0:
        return float(seconds[0])
    f = (loss[i - 1] - target) / (loss[i - 1] - loss[i])
    return float(seconds[i - 1] + f * (seconds[i] - seconds[i - 1]))


def pm(a):
    return f"{a.mean():.3f} ± {a.std():.3f}"


def plot_costs(lesson, names, step_t, update_t, layer_t, depth, shape):
    """Left: one training step per model, Adam's update hatched; the no-norm step plus ``depth`` times the layer
    alone marked. Right: each layer's forward + backward alone at ``shape``."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.6), constrained_layout=True)
    steps_ms = np.array([step_t[n] for n in names]) * 1e3
    colors = [STYLE[n][0] for n in names]
    ticks = [STYLE[n][1].split(" (")[0] for n in names]
    update_ms = np.array([update_t[n] for n in names]) * 1e3
    ax1.bar(ticks, update_ms, color=colors, alpha=0.45, hatch="//", edgecolor="w", label="Adam's update (timed alone)")
    ax1.bar(ticks, steps_ms - update_ms, bottom=update_ms, color=colors, label="forward and backward (the rest)")
    ax1.axhline(steps_ms[0], color="0.3", lw=0.8, ls="--")
    ax1.scatter(ticks[1:], [steps_ms[0] + depth * layer_t[n] * 1e3 for n in names[1:]], marker="_", s=900, lw=2,
                color="k", zorder=3, label=f"no-norm step + {depth} x the layer alone (right)")
    for i, v in enumerate(steps_ms):
        ax1.text(i, v, f"{v:.2f}", ha="center", va="bottom", fontsize=9)
    ax1.set(ylabel="median ms per training step", title="One training step (forward, backward, Adam)",
            ylim=(0, 1.25 * steps_ms.max()))
    ax1.legend(loc="upper left", fontsize=8, ncol=2, markerscale=0.35)
    keys = ["linear", "relu"] + names[1:]
    ax2.bar(["Linear", "ReLU"] + ticks[1:], [layer_t[k] * 1e6 for k in keys], color=["0.6", "0.75"] + colors[1:])
    for i, k in enumerate(keys):
        ax2.text(i, layer_t[k] * 1e6, f"{layer_t[k] * 1e6:.1f}", ha="center", va="bottom", fontsize=9)
    ax2.set(ylabel="median µs, forward + backward", title=f"One layer alone at {shape}, numba backend")
    fig.suptitle("Where the time of a step goes: the step against its parts timed alone (a timing of this machine)")
    lesson.save(fig, "cost")


def plot_regions(lesson, models, acc, x, y):
    """The decision regions of each model on the plane, with test points; ``acc``: the accuracy per model."""
    grid = np.linspace(-2.3, 2.3, lesson.pick(60, 160))
    points = np.stack(np.meshgrid(grid, grid), axis=-1).reshape(-1, 2)
    fig, axes = plt.subplots(2, 3, figsize=(12, 8.2), constrained_layout=True)
    for ax, name in zip(axes.ravel(), list(models)):
        model = models[name]
        model.eval()
        region = model.forward(points).argmax(axis=1).reshape(len(grid), len(grid))
        model.train()
        ax.imshow(region, origin="lower", extent=(grid[0], grid[-1], grid[0], grid[-1]), cmap="Pastel1",
                  vmin=0, vmax=8, interpolation="nearest")
        ax.scatter(*x[:600].T, c=y[:600], cmap="Set1", vmin=0, vmax=8, s=3)
        ax.set(title=f"{STYLE[name][1]}: {acc[name]:.1%}", aspect="equal", xticks=[], yticks=[])
    fig.suptitle("Decision regions after training (seed 0; test accuracy in the titles)")
    lesson.save(fig, "regions")


# -- gradients per block of a Transformer (lesson 11) --
FFN_WEIGHTS = ("mlp.f.0.weight", "mlp.f.2.weight")


def block_grad_norms(model, layers):
    """The norm of the gradient of each block's two feed-forward weight matrices, block 0 at the input."""
    return np.array([np.sqrt(sum(np.sum(np.square(model.grads[f"blocks.{i}.{w}"])) for w in FFN_WEIGHTS))
                     for i in range(layers)])


def gradient_profile(make_model, layers, batch, seeds):
    """Mean over ``seeds`` (initializations) of ``block_grad_norms`` after one forward and backward of the
    Transformer ``make_model(seed)`` (``layers`` blocks) on the token windows ``batch``."""
    ce, profiles = nn.SoftmaxCrossEntropy(), []
    for seed in seeds:
        model = make_model(seed)
        ce.forward(model.forward(batch[:, :-1]), batch[:, 1:])
        model.backward(ce.backward())
        profiles.append(block_grad_norms(model, layers))
    return np.mean(profiles, axis=0)


def top_over_bottom(profile):
    """Mean gradient norm of the top quarter of the blocks over that of the bottom quarter (>= 1 block)."""
    q = max(1, len(profile) // 4)
    return float(np.mean(profile[-q:]) / np.mean(profile[:q]))


def per_seed_time_to(curves, names, axis):
    """{name: [steps or seconds to reach each target loss, per seed]} and the targets: four losses from 90% of
    the starting loss down to just above the worst final loss of the runs. A run that never reaches a target
    is counted as reaching it at the end of its training (censored: its true time is longer)."""
    start = min(c.loss[0] for n in names for c in curves[n])             # no run starts below a target
    worst = max(min(c.loss) for n in names for c in curves[n])           # the worst best loss of any run
    targets = np.geomspace(0.9 * start, max(1.05 * worst, 0.3 * start), 4)

    def reach(c, t):
        when = time_to(np.array(getattr(c, axis)), np.array(c.loss), t)
        return when if np.isfinite(when) else getattr(c, axis)[-1]
    return {n: np.array([[reach(c, t) for t in targets] for c in curves[n]]) for n in names}, targets


def paired_time_ratio(curves, a, b, axis):
    """a's steps or seconds to each target loss over b's: the median over the targets per seed, then the geometric
    mean over seeds with its 95% interval (mean, low, high); and the targets."""
    times, targets = per_seed_time_to(curves, (a, b), axis)
    return np.array(geometric_interval(np.median(times[a] / times[b], axis=1))), targets
