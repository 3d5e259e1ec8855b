"""Training curves: a 10-layer MLP with no norm, BatchNorm, LayerNorm, RMSNorm and pRMSNorm.

The RMSNorm paper's central claim is about training: RMSNorm trains as well
as LayerNorm and costs less per step, so it reaches a given loss sooner in
wall-clock time. Its Figure 1 makes the point that fewer steps to a loss is
not enough: if each step costs more, the run can still be slower. So this
lesson plots every loss twice, against steps and against seconds.

The task: three interleaved spirals of two turns in the plane (4000
training points, 2000 test points, seeded). A boundary that winds twice
needs many pieces, which is what depth buys: in the same steps a LayerNorm
MLP with 2 hidden layers (dotted) stays far behind the 10-layer ones.

The model: ``nn.mlp([2, 64 x 10, 3], norm=...)``, [Linear -> Norm -> ReLU]
ten times, then a Linear; the norms' numba kernels; Adam (lr 1e-3), batches
of 128, the same batches for every model of a seed, 3 seeds. The models
train in turn, one step each (``lessons/_training.py``), and every step is
timed, so a noisy second of the machine slows all of them alike. pRMSNorm
at d = 64 estimates the RMS from k = ceil(64 * 6.25%) = 4 features.

Cost: the whole step is timed (median over all steps and seeds), Adam's
update alone, and each layer's forward + backward alone at the step's shape
(128, 64). At this size a call is mostly fixed overhead. In the network the
norms cost far more than their calls timed alone: Adam updates their
parameters too, and every step handles more arrays. A cheaper normalization
can save only its own share of the step.

What it found here (numbers in the ledger): every normalization beats no
normalization by far; RMSNorm's accuracy is LayerNorm's within the spread
of the seeds, and so is pRMSNorm's (k = 4 features suffice on this task,
although its loss falls later). RMSNorm's layer alone is about 10% faster
than LayerNorm's (one numba kernel does both; RMSNorm skips the mean), the
whole step 2–12% in our runs (the parts timed alone predict about 4%),
around the paper's lower bound of 7%, and a good part of that saving is
Adam's: RMSNorm has no bias, so each layer has one vector fewer to update.
Which side of 7% a run lands on, and which model
reaches a loss first in seconds, moves with the load of a shared machine:
the timing verdicts are recorded, not expected. --quick trains too briefly
to compare: its verdicts are recorded, not expected either.

Figures
* 10_training_curves_loss.png: test loss against steps (band: min–max over
  seeds) and against the seconds each model spent training.
* 10_training_curves_cost.png: the median time of a step per norm, split
  into Adam's update and the rest, against the norm layers timed alone.
* 10_training_curves_regions.png: the decision regions of the seed-0 models.
"""
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python lessons/10_training_curves.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import matplotlib.pyplot as plt
import numpy as np

from lessons._common import APPROX, COMMON, FAILS, HOLDS, VERDICTS, check, paper, run_alone
from lessons._training import (STYLE, accuracy, expect, interleaved_medians, one_blas_thread, plot_costs, plot_race,
                               plot_regions, pm, race, report, saving_verdict, seed_mean, shortfall_verdict, spirals,
                               time_to, warm_up)
from scratchnorm import Linear, nn

NORMS = ("none", "batchnorm", "layernorm", "rmsnorm", "prmsnorm")
DEPTH, WIDTH, CLASSES = 10, 64, 3
BATCH, LR = 128, 1e-3
SEEDS = (0, 1, 2)    # --quick: the first two


def models(seed):
    runs = {norm: nn.mlp([2] + [WIDTH] * DEPTH + [CLASSES], norm=norm, seed=seed) for norm in NORMS}
    runs["shallow"] = nn.mlp([2, WIDTH, WIDTH, CLASSES], norm="layernorm", seed=seed)
    return runs


def train_all(lesson, xtr, ytr, xte, yte):
    steps, every, n_eval = lesson.pick(40, 200), lesson.pick(20, 10), lesson.pick(500, len(xte))
    ce = nn.SoftmaxCrossEntropy()
    curves, acc, seed0 = {}, {}, None
    warm_up(models(seed=99).values(), xtr[:BATCH], ytr[:BATCH])
    for seed in SEEDS[:lesson.pick(2, 3)]:
        rng = np.random.default_rng(100 + seed)
        batches = [(xtr[b], ytr[b]) for b in rng.integers(0, len(xtr), (steps, BATCH))]
        built = models(seed)
        runs = {name: (m, nn.Adam(m, lr=LR)) for name, m in built.items()}
        result = race(runs, batches, lambda m: float(ce.forward(m.forward(xte[:n_eval]), yte[:n_eval])), every)
        for name, m in built.items():
            curves.setdefault(name, []).append(result[name])
            acc.setdefault(name, []).append(accuracy(m, xte, yte))
        seed0 = seed0 or built
    return curves, {k: np.array(v) for k, v in acc.items()}, seed0


def layer_costs(lesson, rng):
    """Median seconds of one forward + backward of each layer at the step's shape (BATCH, WIDTH)."""
    x, dy = rng.standard_normal((BATCH, WIDTH)), rng.standard_normal((BATCH, WIDTH))
    layers = {norm: nn.make_norm(norm, WIDTH) for norm in NORMS[1:]}
    layers |= {"linear": Linear(WIDTH, WIDTH), "relu": nn.ReLU()}
    fns = {name: (lambda layer=layer: (layer.forward(x), layer.backward(dy))) for name, layer in layers.items()}
    return interleaved_medians(fns, lesson.pick(300, 2000))


def update_costs(lesson, x, y):
    """Median seconds of one Adam update of each model (throwaway models, gradients of one batch)."""
    ce, fns = nn.SoftmaxCrossEntropy(), {}
    for norm, model in models(seed=99).items():
        if norm in NORMS:
            ce.forward(model.forward(x), y)
            model.backward(ce.backward())
            fns[norm] = nn.Adam(model, lr=LR).step
    return interleaved_medians(fns, lesson.pick(50, 300))


def run(lesson):
    with one_blas_thread():
        rng = np.random.default_rng(10)
        xtr, ytr = spirals(4000, rng, CLASSES)
        xte, yte = spirals(2000, rng, CLASSES)
        curves, acc, seed0 = train_all(lesson, xtr, ytr, xte, yte)
        layer_t, update_t = layer_costs(lesson, rng), update_costs(lesson, xtr[:BATCH], ytr[:BATCH])
        step_t = {name: float(np.median([c.step_time for c in runs])) for name, runs in curves.items()}
        final = {name: seed_mean(runs)[2][-1] for name, runs in curves.items()}
        for name in curves:
            check(np.all(np.isfinite([c.loss for c in curves[name]])), f"{name}: the test loss stays finite")
            report(lesson, f"  {STYLE[name][1]:<28} test accuracy {pm(acc[name])} (seeds: "
                           f"{', '.join(f'{a:.3f}' for a in acc[name])}), final test loss {final[name]:.3f}, "
                           f"{step_t[name] * 1e3:.2f} ms/step")
        report(lesson, f"  one layer, forward + backward at ({BATCH}, {WIDTH}): "
                       + ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in layer_t.items()))
        check(all(final[n] < np.log(CLASSES) for n in ("batchnorm", "layernorm", "rmsnorm")),
              "the normalized MLPs learn")
        if not lesson.quick:
            check(max(acc[n].mean() for n in NORMS) > 0.85, f"the best {DEPTH}-layer model fits the spirals")
        claims(lesson, acc, step_t, layer_t, update_t, curves)
        figures(lesson, curves, acc, step_t, layer_t, update_t, seed0, xte, yte)


def claims(lesson, acc, step_t, layer_t, update_t, curves):
    mean = {k: v.mean() for k, v in acc.items()}
    normed = ("batchnorm", "layernorm", "rmsnorm")
    margin = min(mean[n] for n in normed) - mean["none"]
    spread = max(acc[n].std() for n in normed + ("none",))
    lesson.claim(f"A deep plain MLP ({DEPTH} hidden layers) trains better with a normalization than without",
                 source=COMMON, measured=f"test accuracy over {len(acc['none'])} seeds: no norm {pm(acc['none'])}; "
                 + "; ".join(f"{STYLE[n][1]} {pm(acc[n])}" for n in normed)
                 + f"; 2 hidden layers (LayerNorm) {pm(acc['shallow'])}",
                 verdict=HOLDS if margin > 2 * max(spread, 0.01) else APPROX if margin > 0 else FAILS,
                 expect=expect(lesson, HOLDS))

    def as_good(claim, source, norm, reference, note):
        """``norm``'s accuracy against ``reference``'s: a shortfall within the spread of the seeds holds."""
        short = mean[reference] - mean[norm]
        spread = max(acc[reference].std(), acc[norm].std())
        lesson.claim(claim, source=source, measured=f"{note}test accuracy {STYLE[norm][1]} {pm(acc[norm])} "
                     f"(seeds {', '.join(f'{a:.3f}' for a in acc[norm])}) vs {STYLE[reference][1]} "
                     f"{pm(acc[reference])} (mean ± std over {len(acc[norm])} seeds, {DEPTH}-layer MLP)",
                     verdict=shortfall_verdict(short, spread), expect=expect(lesson, HOLDS))

    as_good("RMSNorm trains as well as LayerNorm", paper("abstract, §1"), "rmsnorm", "layernorm", "")
    as_good("pRMSNorm with p = 6.25% is competitive with RMSNorm", paper("§1"), "prmsnorm", "rmsnorm",
            f"d = {WIDTH}, so k = 4 features: ")

    r_layer = layer_t["rmsnorm"] / layer_t["layernorm"]
    lesson.claim("RMSNorm's layer (forward + backward) costs less than LayerNorm's", source=paper("abstract, §1"),
                 measured=f"numba backend at ({BATCH}, {WIDTH}): RMSNorm {layer_t['rmsnorm'] * 1e6:.1f} us, "
                          f"LayerNorm {layer_t['layernorm'] * 1e6:.1f} us (ratio {r_layer:.2f}); "
                          f"a Linear({WIDTH}, {WIDTH}) {layer_t['linear'] * 1e6:.1f} us",
                 verdict=saving_verdict(r_layer), expect=VERDICTS)

    r_step = step_t["rmsnorm"] / step_t["layernorm"]
    share = 1 - step_t["none"] / step_t["layernorm"]
    parts = (DEPTH * (layer_t["layernorm"] - layer_t["rmsnorm"]) + update_t["layernorm"] - update_t["rmsnorm"]) \
        / step_t["layernorm"]
    lesson.claim("With RMSNorm a training step takes 7%–64% less time than with LayerNorm",
                 source=paper("abstract, §1"),
                 measured=f"median step RMSNorm {step_t['rmsnorm'] * 1e3:.2f} ms vs LayerNorm "
                          f"{step_t['layernorm'] * 1e3:.2f} ms (ratio {r_step:.3f}); without a norm "
                          f"{step_t['none'] * 1e3:.2f} ms, so LayerNorm is {share:.0%} of its step. Adam's update "
                          f"alone: RMSNorm {update_t['rmsnorm'] * 1e3:.2f} ms, LayerNorm "
                          f"{update_t['layernorm'] * 1e3:.2f} ms (RMSNorm has no bias: {DEPTH} vectors fewer); "
                          f"the parts timed alone predict a saving of {parts:.1%}",
                 verdict=saving_verdict(r_step), expect=VERDICTS)

    ln, rms = seed_mean(curves["layernorm"]), seed_mean(curves["rmsnorm"])
    worse = max(np.mean(ln[2][-3:]), np.mean(rms[2][-3:]))          # the worse final loss, last 3 evaluations
    hi = 0.5 * np.log(CLASSES) if 0.5 * np.log(CLASSES) > 1.05 * worse else 0.95 * np.log(CLASSES)
    targets = np.geomspace(hi, 1.05 * worse, 4)                       # losses both curves reach
    times = [(time_to(ln[1], ln[2], t), time_to(rms[1], rms[2], t)) for t in targets]
    ratio = float(np.median([t_rms / t_ln for t_ln, t_rms in times]))
    lesson.claim("RMSNorm reaches a given loss sooner in wall-clock time than LayerNorm",
                 source=paper("§1, Figure 1"),
                 measured="seconds to reach the test loss (mean of seeds), LayerNorm / RMSNorm: "
                          + "; ".join(f"{t:.2f}: {a:.2f} / {b:.2f}" for t, (a, b) in zip(targets, times))
                          + f" (median ratio {ratio:.2f})",
                 verdict=HOLDS if ratio <= 0.95 else APPROX if ratio <= 1.05 else FAILS, expect=VERDICTS)


def figures(lesson, curves, acc, step_t, layer_t, update_t, seed0, xte, yte):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8), constrained_layout=True)
    plot_race(ax1, ax2, curves, "test loss (cross-entropy)")
    for ax in (ax1, ax2):
        ax.axhline(np.log(CLASSES), color="k", lw=0.8, ls="--")
        ax.set_yscale("log")
    ax2.text(ax2.get_xlim()[1], np.log(CLASSES) * 1.04, "chance: ln 3 ", fontsize=9, ha="right")
    ax1.legend(loc="lower left", ncol=2)
    ax1.set_title(f"Against steps (mean of {len(acc['none'])} seeds; band: min–max)")
    ax2.set_title("Against the seconds each model spent training")
    fig.suptitle(f"Spirals, MLP of {DEPTH} hidden layers of {WIDTH}, Adam lr {LR:g}, batch {BATCH}")
    lesson.save(fig, "loss")

    plot_costs(lesson, list(NORMS), step_t, update_t, layer_t, DEPTH, (BATCH, WIDTH))
    plot_regions(lesson, {n: seed0[n] for n in list(NORMS) + ["shallow"]}, {n: acc[n][0] for n in acc}, xte, yte)


if __name__ == "__main__":
    sys.exit(run_alone(__file__))
