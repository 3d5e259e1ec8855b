"""The plumbing of the training lessons (10, 11, 12, 16, 19, 20): the training step, a fair race, timing, one BLAS
thread, intervals and printing (other lessons use the last four too). Each lesson writes its own model, data,
seeds and measured quantity on its page; their figures are in ``_training_plots.py`` and ``_placement_plots.py``.

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

import numpy as np

from lessons._common import FAILS, INCONCLUSIVE, VERDICTS
from lessons._grading import APPROX, HOLDS, bound_met, deciding_factor, fails_bound_met, verdict_of
from lessons._stats import mean_interval
from scratchnorm import nn


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


def seeds_to_decide(claim, seeds: int, seconds_per_seed: float) -> str:
    """What would decide an inconclusive claim (a ``lessons._common.Claim`` of this run, graded on ``seeds``), for
    the prose, from the ledger's forecast (``deciding_factor``: its interval, t's shrinking included, if the
    estimate stayed put) and the seconds one seed took in this run: 'about 34 seeds (6.8× this run's 5) would
    narrow it clear of 0.5 if the estimate stayed put: about 2 minutes at this run's 3.6 s a seed'. A claim beside
    an inconclusive control is forecast by the larger of the two (the control must fail for the claim to count);
    a claim settled on its own beside a control whose estimate lies inside the bound the claim met cannot be
    decided by seeds. '' for a decided claim."""
    if claim.verdict != INCONCLUSIVE:
        return ""
    c, ctrl = claim, claim.control
    own = verdict_of(c.value, c.holds_if, c.approx_if, c.interval, c.rejects_if)
    found = [deciding_factor(c.value, c.interval, c.holds_if, c.approx_if, c.rejects_if, seeds)] \
        if own == INCONCLUSIVE else []
    # where the claim settles (its estimate's verdict while open): if it holds, its control must fail the bound it
    # met (lessons/_grading.py, ``beside_control``), which seeds can do only if the control's estimate lies outside
    settles = own if own != INCONCLUSIVE else verdict_of(c.value, c.holds_if, c.approx_if, None, c.rejects_if)
    if ctrl is not None and settles in (HOLDS, APPROX):
        met = bound_met(settles, c.holds_if, c.approx_if)
        if verdict_of(ctrl["value"], met) != FAILS:
            return (f"no number of seeds while its control ({ctrl['label']}) sits inside the bound the claim meets "
                    f"({ctrl['verdict']} on the same bounds): only a control that fails it lets the row be decided")
        if not fails_bound_met(settles, ctrl, c.holds_if, c.approx_if):
            found.append(deciding_factor(ctrl["value"], ctrl["interval"], met, None, None, seeds))
    if not found or any(f is None or not np.isfinite(f[1]) for f in found):
        return "no number of seeds: the estimate sits on the bound"
    bound, factor = max(found, key=lambda f: f[1])
    need = int(np.ceil(factor * seeds))
    seconds = need * seconds_per_seed
    return (f"about {need} seeds ({factor:.3g}× this run's {seeds}) would narrow it clear of {bound:.3g} if the "
            f"estimate stayed put: about {f'{seconds / 60:.0f} minutes' if seconds >= 120 else f'{seconds:.0f} s'} "
            f"at this run's {seconds_per_seed:.2g} s a seed")


def forecast_check(pilot, fresh, bounds: dict, summary=mean_interval):
    """The ledger's forecast (``deciding_factor``) made on the ``pilot`` values (one per seed), checked against a
    rerun on ``fresh`` ones: (the seeds it asked for, the ``summary`` (mean, low, high) of the first that many
    fresh values, its verdict on ``bounds``, ``{"holds_if": ..., "approx_if": ...}``); None for a pilot that is
    decided, or whose estimate sits on a bound. ``summary``: ``mean_interval``, or ``geometric_interval`` for
    ratios."""
    m, lo, hi = summary(pilot)
    if verdict_of(m, **bounds, interval=(lo, hi)) != INCONCLUSIVE:
        return None
    found = deciding_factor(m, (lo, hi), bounds["holds_if"], bounds.get("approx_if"), None, len(pilot))
    if found is None or not np.isfinite(found[1]):
        return None
    need = int(np.ceil(found[1] * len(pilot)))
    m, lo, hi = summary(fresh[:need])
    return need, (m, lo, hi), verdict_of(m, **bounds, interval=(lo, hi))


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


def race(runs: dict, batches, evaluate, every: int, schedules=None, *, at=None) -> dict:
    """Train ``runs`` {name: (model, optimizer)} on the same ``batches`` [(x, target), ...].

    ``evaluate(model) -> loss`` runs in eval mode every ``every`` steps, at step 0 and at the
    end; or, given ``at`` (steps, 0 before training), at those steps only: a lesson that reads only the
    end's loss skips the others, which cost as much as training steps and change no bit of the training.
    ``schedules`` {name: f(step) -> lr} (optional) sets a run's learning rate of step 1, 2, ...
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

    def due(step):
        return step in at if at is not None else step % every == 0 or step == len(batches)

    if due(0):
        record(0)
    for step, (x, target) in enumerate(batches, 1):
        for name in names[step % len(names):] + names[:step % len(names)]:
            model, opt = runs[name]
            if schedules is not None:
                opt.lr = schedules[name](step)
            start = time.perf_counter()
            train_step(model, ce, opt, x, target)
            curves[name].step_times.append(time.perf_counter() - start)
        if due(step):
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


def pm(a) -> str:
    """'0.412 ± 0.031 sd': the mean and the sample standard deviation (ddof = 1, the spread between seeds, not
    the interval of the mean) of the per-seed values ``a`` (printing); one value prints alone."""
    a = np.asarray(a, dtype=float)
    return f"{a.mean():.3f}" if a.size < 2 else f"{a.mean():.3f} ± {a.std(ddof=1):.3f} sd"
