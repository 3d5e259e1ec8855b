# %% [markdown]
# # Threads in a training loop: a parallel kernel between NumPy's matrix products
#
# numba's documentation shows how to make a loop parallel: write `prange` for `range` and compile with
# `parallel=True`. A learner who writes RMSNorm that way gets the twenty-line kernel of
# `scratchnorm/bench/naive.py` (`PRANGE.rms_forward`, `PRANGE.rms_backward`: each row's sums in float64,
# rows shared among numba's threads; `SERIAL` is the same code compiled without `parallel`). Timed alone, called
# again and again, it is the kind of kernel a second thread should help on a large array (Part 1 measures
# how much). This lesson then puts it where a learner puts it: in a small MLP, `nn.mlp([16, 64, 64, 10])` on
# 300 rows, whose matrix products run on NumPy's BLAS (OpenBLAS, one thread per core), and times the training
# step.
#
# Three runtimes then share the cores: numba's threads (here the `omp` threading layer, on GNU OpenMP,
# libgomp), OpenBLAS's threads, and anything else the machine runs. Neither thread pool goes to sleep when its
# work ends. libgomp's threads keep checking for new work for a while (a busy-wait: 300,000 spins by default,
# `GOMP_SPINCOUNT`; none with `OMP_WAIT_POLICY=passive`), and OpenBLAS's idle threads also spin, yielding,
# before they sleep. That is fast when every thread has a core of its own: the next parallel region starts at
# once. On two cores with four such threads it need not be: a thread that must wait for another that has no
# core waits until the scheduler gives that one a time slice, which can last milliseconds, where the work
# itself takes microseconds. Whether it does here is what Parts 2 and 3 measure.
#
# The lesson measures, on this machine and under whatever load it has (recorded with each claim):
# the kernel alone on one and two threads; the same kernel inside the training step, against its time alone;
# and three remedies: one BLAS thread, `OMP_WAIT_POLICY=passive`, and the serial kernel, the library's default.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)

import os
import time

import matplotlib.pyplot as plt
import numba
import numpy as np

from scratchnorm import nn, threads
from scratchnorm.bench import fresh
from scratchnorm.bench.naive import NaiveNorm, naive_steps
from scratchnorm.bench.norms import NORMS, make_inputs
from scratchnorm.bench.training import batch_of
from lessons._common import COMMON, VERDICTS, check, start, work
from lessons._grading import above
from lessons._training import report

lesson = start(__name__, "26_threads_in_a_training_loop")
RUNS_ALONE = True   # it times kernels and training steps: `python -m lessons` runs it with nothing beside it
TWO = min(2, numba.config.NUMBA_NUM_THREADS)


def load() -> str:
    """The machine's load average over the last minute, for the claims' measured text."""
    return f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"


# %% [markdown]
# ## Part 1: the prange kernel alone, on one thread and on two
#
# RMSNorm's forward and backward (`naive_steps`, the prange copy, buffers allocated once), float64 like the
# MLP, on the MLP's own shape (300 rows of 64) and on a large one. The two thread counts are interleaved call
# by call (`numba.set_num_threads` before each), so that the machine's noise falls on both; the median of
# each is kept.

# %%
def kernel_alone(shape, calls):
    inp = make_inputs(NORMS["rmsnorm"], shape, np.float64, seed=26)
    fwd_bwd = naive_steps(NORMS["rmsnorm"], inp, parallel=True)["fwd+bwd"]
    times = {1: [], TWO: []}
    for call in range(calls + 1):
        for n in (1, TWO) if call % 2 else (TWO, 1):
            numba.set_num_threads(n)
            t0 = time.perf_counter()
            fwd_bwd()
            times[n].append(time.perf_counter() - t0)
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    return {n: float(np.median(t[1:])) for n, t in times.items()}        # the first call is not counted


shapes = lesson.pick([(300, 64), (512, 512)], [(300, 64), (1024, 1024)])
alone = {s: kernel_alone(s, lesson.pick(10, 200) if s == (300, 64) else lesson.pick(6, 40)) for s in shapes}
for s, t in alone.items():
    report(lesson, f"  prange kernel alone at {s[0]}x{s[1]}: 1 thread {t[1] * 1e6:.0f} us, {TWO} threads "
                   f"{t[TWO] * 1e6:.0f} us ({t[1] / t[TWO]:.2f}x); {load()}")
    lesson.claim(f"Two numba threads run the prange RMSNorm kernel faster than one, alone ({s[0]}x{s[1]})",
                 source=COMMON,
                 measured=f"forward + backward, float64, median of interleaved calls: 1 thread {t[1] * 1e6:.0f} us, "
                          f"{TWO} threads {t[TWO] * 1e6:.0f} us; 1-thread time over {TWO}-thread time "
                          f"{t[1] / t[TWO]:.2f} (the value; holds from 1.5); {load()}",
                 value=t[1] / t[TWO], **above(1.5, approx=1.1), timed=True, expect=VERDICTS)

# %% [markdown]
# ## Part 2: the same kernel between NumPy's matrix products
#
# A learner's training loop: the MLP with `NaiveNorm` (a layer around the prange kernel, `naive.py`) as its two
# norm layers, softmax cross-entropy and Adam, one full batch of 300 rows a step. The lesson wraps each norm
# layer's forward and backward in a clock, so that each step gives two times: the whole step, and the norm
# layers' share of it. Two settings take turns in blocks of steps: NumPy's BLAS as installed (one thread per
# core) and `with scratchnorm.threads.limit(blas=1):`, the one-line remedy (threadpoolctl underneath). numba
# keeps its threads in both. Then the same two norm layers run alone on the inputs they saw, forward and
# backward, with nothing between the calls.

# %%
model = fresh.LEARNER_MLPS[1]            # MLP 16-64-64-10, RMSNorm, 300 rows (the bench's learner's MLP)
check(model.sizes == (16, 64, 64, 10) and model.norm == "rmsnorm", f"the learner's MLP: {model}")
net = nn.mlp(list(model.sizes), norm=lambda d: NaiveNorm("rmsnorm", d), seed=26)
x, target = batch_of(model, seed=26)
ce, opt = nn.SoftmaxCrossEntropy(), nn.Adam(net, lr=fresh.LR)
norms = [layer for layer in net if isinstance(layer, NaiveNorm)]
in_norm, seen = [], {}                   # seconds in the norm layers this step; each layer's last input


def clocked(layer, name):
    inner = getattr(layer, name)

    def call(*args):
        t0 = time.perf_counter()
        out = inner(*args)
        in_norm.append(time.perf_counter() - t0)
        seen.setdefault(layer, args)     # the layer's first input (x for the forward, dy and cache for the backward)
        return out
    return call


for layer in norms:
    layer._forward, layer._backward = clocked(layer, "_forward"), clocked(layer, "_backward")


def step():
    in_norm.clear()
    t0 = time.perf_counter()
    ce.forward(net.forward(x), target)
    net.backward(ce.backward())
    opt.step()
    return time.perf_counter() - t0, sum(in_norm)


SETTINGS = {"BLAS as installed": lambda: threads.limit(blas=os.cpu_count()),
            "limit(blas=1)": lambda: threads.limit(blas=1)}
numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
step()                                   # the first step loads the kernels
steps = {name: [] for name in SETTINGS}
blocks, per_block = lesson.pick((2, 3), (6, 8))
for b in range(blocks):
    for name in list(SETTINGS)[:: 1 if b % 2 == 0 else -1]:
        with SETTINGS[name]():
            steps[name] += [step() for _ in range(per_block)]
p50 = {name: np.median(np.array(v), axis=0) for name, v in steps.items()}      # (step, norm layers) seconds
inputs = [seen[layer] for layer in norms]
dys = [np.random.default_rng(26).standard_normal(a[0].shape) for a in inputs]


def norms_alone():
    t0 = time.perf_counter()
    for layer, (h,), dy in zip(norms, inputs, dys):
        y, cache = layer._forward(h)
        layer._backward(dy, cache)
    return time.perf_counter() - t0


norms_alone()
alone_in_loop = float(np.median([norms_alone() for _ in range(lesson.pick(20, 200))]))
installed, one = p50["BLAS as installed"], p50["limit(blas=1)"]
for name, (s, n) in p50.items():
    report(lesson, f"  {name}: step p50 {s * 1e3:.2f} ms, norm layers {n * 1e3:.3f} ms of it")
report(lesson, f"  the two norm layers alone: {alone_in_loop * 1e3:.3f} ms; {load()}")
lesson.claim("The prange kernel takes longer between NumPy's matrix products than alone",
             source=work("threads", "libgomp OMP_WAIT_POLICY"),
             measured=f"the MLP's two norm layers, forward and backward, p50 inside the step with BLAS as installed "
                      f"{installed[1] * 1e3:.3f} ms against {alone_in_loop * 1e3:.3f} ms alone: "
                      f"{installed[1] / alone_in_loop:.1f}x (the value; holds from 2); {load()}",
             value=installed[1] / alone_in_loop, **above(2, approx=1.2), timed=True, expect=VERDICTS)
lesson.claim("One BLAS thread makes the prange kernel's training step faster (limit(blas=1))",
             source=work("threads", "OpenBLAS #731"),
             measured=f"step p50 {installed[0] * 1e3:.2f} ms with BLAS as installed, {one[0] * 1e3:.2f} ms inside "
                      f"threads.limit(blas=1): {installed[0] / one[0]:.1f}x (the value; holds from 2); {load()}",
             value=installed[0] / one[0], **above(2, approx=1.2), timed=True, expect=VERDICTS)

# %% [markdown]
# ## Part 3: the remedies that must start with the process
#
# `OMP_WAIT_POLICY` is read once, when the OpenMP runtime starts, so it cannot be switched inside a running
# Python. So each setting runs as a learner runs a script: a new interpreter (`scratchnorm.bench.fresh`'s child,
# a short timeout), the same seeded model and data, its steps timed from the second on. The environment is this
# one's without any thread variable, plus the setting's. Four settings, taken in turn (and in reverse order a
# second time, in a full run): the prange kernel as installed, with `OMP_WAIT_POLICY=passive`, with
# `OPENBLAS_NUM_THREADS=1` (what `limit(blas=1)` does, for the whole process), and the library's own layer on
# its default, serial kernel (`backend="numba"`), as installed.

# %%
PROCESSES = {"prange, as installed": ("naive", {}),
             "prange, OMP_WAIT_POLICY=passive": ("naive", {"OMP_WAIT_POLICY": "passive"}),
             "prange, OPENBLAS_NUM_THREADS=1": ("naive", {"OPENBLAS_NUM_THREADS": "1"}),
             "serial kernel (the default)": ("numba", {})}
clean = {k: v for k, v in os.environ.items() if k not in fresh.thread_settings()}
order = list(PROCESSES) + lesson.pick([], list(PROCESSES)[::-1])
runs = {name: [] for name in PROCESSES}
for name in order:
    backend, extra = PROCESSES[name]
    child = fresh.run_child(model, backend, lesson.pick(5, 40), lesson.pick(0.3, 1.5), seed=26,
                            env={**clean, **extra}, timeout_s=lesson.pick(60, 120))
    runs[name] += child["steps_s"]
fresh_p50 = {name: float(np.median(v)) for name, v in runs.items()}
fresh_p90 = {name: float(np.percentile(v, 90)) for name, v in runs.items()}
for name in PROCESSES:
    report(lesson, f"  fresh process, {name}: step p50 {fresh_p50[name] * 1e3:.2f} ms, p90 "
                   f"{fresh_p90[name] * 1e3:.2f} ms ({len(runs[name])} steps)")
base = fresh_p50["prange, as installed"]
for name, cited in (("prange, OMP_WAIT_POLICY=passive", work("threads", "libgomp GOMP_SPINCOUNT")),
                    ("serial kernel (the default)", work("threads", "numba threading layers"))):
    lesson.claim(f"The training step is faster in a fresh process with the remedy ({name})",
                 source=cited,
                 measured=f"step p50 {base * 1e3:.2f} ms with the prange kernel as installed, "
                          f"{fresh_p50[name] * 1e3:.2f} ms with {name}: {base / fresh_p50[name]:.1f}x (the value; "
                          f"holds from 2); {len(order) // len(PROCESSES)} process(es) each; {load()}",
                 value=base / fresh_p50[name], **above(2, approx=1.2), timed=True, expect=VERDICTS)

# %% [markdown]
# The figure: on the left, the kernel alone on two threads, its time over its time on one (log scale: below the
# dashed line two threads were faster); on the right, the training step's median (the dot) and 90th percentile
# (the tick) in each setting, the in-process pair and the fresh processes, on a log scale.

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 4.2), gridspec_kw={"width_ratios": [1, 2], "wspace": 1.0})
ratio = np.array([alone[s][TWO] / alone[s][1] for s in shapes])            # 2-thread time over 1-thread time
ax1.plot(range(len(shapes)), ratio, "o", color="C1", markersize=10, label=f"{TWO} threads")
ax1.axhline(1, color="C0", ls="--", label="1 thread")
ax1.set_xticks(range(len(shapes)), [f"{s[0]}x{s[1]}" for s in shapes])
ax1.set(yscale="log", xlim=(-0.5, len(shapes) - 0.5), ylim=(min(0.3, ratio.min() / 2), max(3, ratio.max() * 2)),
        ylabel="time over the 1-thread time (median)", title="The prange kernel alone, forward + backward")
ax1.legend(loc="upper right")
bars = {f"in process: {k}": (v[0], np.percentile([s for s, _ in steps[k]], 90)) for k, v in p50.items()}
bars |= {f"fresh: {k}": (fresh_p50[k], fresh_p90[k]) for k in PROCESSES}
ax2.scatter([v[0] * 1e3 for v in bars.values()], list(bars), s=90, color=["C3", "C2", "C3", "C1", "C2", "C0"],
            zorder=3, label="median")
ax2.plot([v[1] * 1e3 for v in bars.values()], list(bars), "k|", markersize=14, label="90th percentile")
ax2.grid(axis="x", which="both", alpha=0.3)
ax2.set(xscale="log", xlabel="training step, ms (median)", title=f"The MLP's step ({load()})")
ax2.invert_yaxis()
ax2.legend(loc="lower right")
lesson.save(fig, "steps")

# %% [markdown]
# ## Questions
#
# **1.** Part 1 measured how much two threads speed up the kernel alone. Before reading Part 2's numbers: inside
# the training step, with BLAS as installed, did the norm layers take more or less time than alone, and by how
# much?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
small = alone[(300, 64)]                  # the kernel alone at the MLP's shape: {threads: seconds}
lesson.answer(("More" if installed[1] > alone_in_loop else "Less") + f", {installed[1] / alone_in_loop:.1f} times "
              f"as long in this run: {installed[1] * 1e3:.3f} ms a step for the two norm layers inside the step, "
              f"{alone_in_loop * 1e3:.3f} ms alone. "
              + ("Alone, numba's second thread is still spinning from the last call when the next one starts. "
                 if small[1] >= small[TWO] else "Here even the kernel alone was slower on two threads than on one "
                 "(the machine's other programs held the cores, " + load() + "). ")
              + "Between the matrix products numba's second thread has stopped spinning or lost its core to "
              "OpenBLAS's threads (which spin too) and to the machine's other programs; each parallel region then "
              f"waits for a thread to be woken or scheduled, a time slice away. At the MLP's shape two threads ran the "
              f"kernel alone in {small[TWO] * 1e6:.0f} us against {small[1] * 1e6:.0f} us on one; the whole step went "
              f"from {installed[0] * 1e3:.2f} ms to {one[0] * 1e3:.2f} ms with one BLAS thread.")

# %% [markdown]
# **2.** `OMP_WAIT_POLICY=passive` makes numba's OpenMP threads sleep at once instead of spinning. Does it also
# quiet OpenBLAS's threads? Which of the fresh processes' settings would you use on a shared laptop?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
passive = base / fresh_p50["prange, OMP_WAIT_POLICY=passive"]          # as installed over passive, p50
lesson.answer("No: it is read by the OpenMP runtime numba's omp layer uses (libgomp), and NumPy's OpenBLAS wheel "
              "runs its own pthreads pool, which has its own spin-then-sleep loop. In this run the fresh processes "
              "took " + ", ".join(f"{k} {fresh_p50[k] * 1e3:.2f} ms" for k in PROCESSES) + " (p50 a step). "
              + (f"Passive alone cut the prange kernel's step {passive:.1f}x: a numba thread that sleeps at once no "
                 "longer holds a core that OpenBLAS's threads and the main thread need; OpenBLAS's own spinning "
                 "remains. " if passive >= 1.2 else f"Passive alone changed the step only {passive:.2f}x here. ")
              + "On a shared machine the simplest is the serial kernel (the library's default) with one BLAS thread: "
              "`with scratchnorm.threads.limit(blas=1):` around the loop, or OPENBLAS_NUM_THREADS=1 before Python "
              f"starts. For scale: the kernel alone at the MLP's shape took {small[1] * 1e6:.0f} us on one numba "
              f"thread and {small[TWO] * 1e6:.0f} us on two; the prange kernel's step, as installed, "
              f"{base * 1e3:.2f} ms.")

# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    f"A parallel kernel's speed alone ({alone[shapes[-1]][1] / alone[shapes[-1]][TWO]:.2f}x on {TWO} threads at "
    f"{shapes[-1][0]}x{shapes[-1][1]}) says little about it in a training loop: here its layers took "
    f"{installed[1] / alone_in_loop:.1f}x their time alone between NumPy's matrix products ("
    + lesson.result("between NumPy's matrix products") + f"; timed, {load()}).",
    "Spinning thread pools share cores badly: give BLAS one thread around a small model's loop "
    f"(`scratchnorm.threads.limit(blas=1)`: step p50 {installed[0] * 1e3:.2f} -> {one[0] * 1e3:.2f} ms), or let "
    "OpenMP's threads sleep (OMP_WAIT_POLICY=passive, set before the process starts), or use the serial kernel: "
    + lesson.results("faster in a fresh process with the remedy") + ".",
    "Time a kernel where it runs, not alone: the question is the step a learner waits for.")

# %%
lesson.finish()
