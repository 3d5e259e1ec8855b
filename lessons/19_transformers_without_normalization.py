# %% [markdown]
# # Transformers without normalization? DyT's observation and its claims, on the tiny Transformer.
# DyT (Zhu et al. 2025; ``scratchnorm.DyT``, its backward in ``scratchnorm/dyt.py``) replaces
# each norm by an elementwise
#
#     y = tanh(alpha x) * weight + bias,      alpha a learnable scalar, alpha0 = 0.5 by default
#
# with no statistic at all, so no reduction over the features. The paper starts from an
# observation: plotted against its input, a trained Transformer's LayerNorm output traces an
# S-shaped, tanh-like curve. The division by each token's own standard deviation does it: the
# few tokens with extreme values also have a large standard deviation, and come out squashed.
#
# The observation, measured. The tiny Transformer of lesson 12's data (Python's docstrings,
# characters), LayerNorm, pre-norm, trained briefly; then for each LayerNorm and each channel,
# the slope of its output (before the affine) against its input, fitted on the tokens in the
# tails of that channel's input (beyond the 95th percentile of |x - median|) over the slope
# in the middle half. A straight line gives 1; a curve that squashes the extremes, less. The
# same number is taken on the untrained model, which has the division too.
#
# The claims, measured. LayerNorm, RMSNorm and DyT (alpha0 0.1, 0.5 and 2) trained on the same
# batches, Adam at the rate lesson 12 uses, for each seed (``--seeds``, default 3): the
# validation loss against steps and against seconds, and the pairwise differences with 95%
# intervals. The paper's claims come from models thousands of times larger, trained for far
# longer; in this small, short setting DyT trails the norms, and its result depends on
# alpha0 (the two claims are expected not to hold here, and the ledger has the numbers). The
# layers are also timed alone: DyT has no reduction, but it computes a tanh per element
# (scratchnorm/fast/dyt.py writes one that vectorizes), which costs more than the statistic
# it saves here.
#
# Figures
# * 19_transformers_without_normalization_map.png: a trained LayerNorm's output against its
#   input for four channels, with tanh(a x) fitted; the tail slope per layer, trained and not.
# * 19_transformers_without_normalization_training.png: validation loss against steps and
#   seconds, LayerNorm, RMSNorm and DyT(0.5), and DyT for three alpha0.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numpy as np

import scratchnorm as sn
from lessons._common import APPROX, FAILS, HOLDS, check, start, work
from lessons._corpus import char_data
from lessons._dyt import BATCH, D, T, captured_inputs, input_output, tail_slope, train, transformer
from lessons._grading import below, nearest_end
from lessons._stats import mean_interval
from lessons._training import STYLE, expect, interleaved_medians, interval, one_blas_thread, plot_race, report

lesson = start(__name__, "19_transformers_without_normalization")

# %%
KEYS = ("layernorm", "rmsnorm", ("dyt", 0.5), ("dyt", 0.1), ("dyt", 2.0))


def final(curve):
    return float(np.mean(curve.loss[-2:]))          # the last two evaluations




def claims(lesson, curves, slopes, layer_t, unigram):
    trained = float(np.median(slopes["trained"]))
    lesson.claim("A trained Transformer's LayerNorm maps its input to an S-shaped, tanh-like curve (the extremes "
                 "squashed)", source=work("dyt", "tanh-like mappings"),
                 measured="slope of the output on the input in the tails over the slope in the middle, median over "
                          "channels, per LayerNorm (input to output): trained "
                          + ", ".join(f"{s:.2f}" for s in slopes["trained"]) + "; untrained "
                          + ", ".join(f"{s:.2f}" for s in slopes["untrained"])
                          + f"; value: the trained model's median ({trained:.2f}; 1 for a straight line)",
                 value=trained, **below(0.9, approx=0.97), expect=(HOLDS, APPROX))
    k = len(curves["layernorm"])
    gap = mean_interval([final(d) - final(n) for d, n in zip(curves["dyt", 0.5], curves["layernorm"])])
    rms_gap = mean_interval([final(d) - final(n) for d, n in zip(curves["dyt", 0.5], curves["rmsnorm"])])
    bounds = below(0.03, approx=0.1)
    lesson.claim("Transformers with DyT in place of their norms match or exceed the normalized ones",
                 source=work("dyt", "abstract"),
                 measured=f"final validation loss, DyT(0.5) minus LayerNorm, paired per seed: {interval(*gap, n=k)}; "
                          f"minus RMSNorm: {interval(*rms_gap, n=k)} (unigram baseline {unigram:.3f}); value: the top "
                          "of the LayerNorm interval (holds if the whole interval is at most 0.03 nats worse)",
                 value=nearest_end(gap[1:], bounds["holds_if"]), **bounds, expect=expect(lesson, FAILS))
    means = {a: float(np.mean([final(c) for c in curves["dyt", a]])) for a in (0.1, 0.5, 2.0)}
    spread = max(means.values()) - min(means.values())
    lesson.claim("Outside large language models, training with DyT is insensitive to alpha0 (0.5 works)",
                 source=work("dyt", "initialization of alpha"),
                 measured="final validation loss, mean over seeds, alpha0 = "
                          + ", ".join(f"{a:g}: {v:.3f}" for a, v in means.items())
                          + f"; value: the spread ({spread:.3f} nats; holds up to 0.03)",
                 value=spread, **below(0.03, approx=0.1), expect=expect(lesson, FAILS))
    ratio = layer_t["dyt"] / layer_t["rmsnorm"]
    lesson.claim("DyT is faster than RMSNorm: it has no reduction", source=work("dyt", "efficiency"),
                 measured=f"forward + backward of the layer alone, numba kernels, ({BATCH * T}, {D}) float64: "
                          + ", ".join(f"{n} {t * 1e6:.1f} us" for n, t in layer_t.items())
                          + f"; value: DyT / RMSNorm ({ratio:.2f}; holds at most 0.9)",
                 value=ratio, **below(0.9, approx=1.0), expect=(HOLDS, APPROX, FAILS) if lesson.quick else FAILS)


def figures(lesson, trained_maps, slopes, curves, unigram):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    x, y = trained_maps[len(trained_maps) // 2]
    for j, color in zip(np.argsort(-np.abs(x).max(0))[:4], ("tab:blue", "tab:orange", "tab:green", "tab:purple")):
        axes[0].plot(x[:, j], y[:, j], ".", ms=2, color=color, alpha=0.5, label=f"channel {j}")
    axes[0].set(xlabel="LayerNorm input", ylabel="output (before the affine)",
                title=f"a trained LayerNorm: four channels, {len(x)} tokens")
    axes[0].legend(fontsize=8, markerscale=4)
    for label, marker in (("trained", "o-"), ("untrained", "s--")):
        axes[1].plot(range(1, len(slopes[label]) + 1), slopes[label], marker, label=label)
    axes[1].axhline(1.0, color="k", lw=1, ls=":", label="a straight line")
    axes[1].set(xlabel="LayerNorm, input to output", ylabel="tail slope / middle slope (median over channels)",
                title="how much the extremes are squashed", ylim=(0, 1.2))
    axes[1].legend(fontsize=8)
    lesson.save(fig, "map")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    plot_race(axes[0], axes[1], {"layernorm": curves["layernorm"], "rmsnorm": curves["rmsnorm"],
                                 "dyt": curves["dyt", 0.5]}, "validation loss (nats)")
    for a, ls in ((0.1, ":"), (0.5, "-"), (2.0, "--")):
        runs = curves["dyt", a]
        mean = np.mean([c.loss for c in runs], axis=0)
        axes[2].plot(runs[0].steps, mean, ls, color="tab:red", label=f"DyT, alpha0 = {a:g}")
    axes[2].plot(curves["layernorm"][0].steps, np.mean([c.loss for c in curves["layernorm"]], axis=0),
                 color=STYLE["layernorm"][0], label="LayerNorm")
    axes[2].set(xlabel="training step", ylabel="validation loss (nats)", title="DyT's alpha0 (mean over seeds)")
    for ax in axes:
        ax.axhline(unigram, color="0.5", lw=1, ls=":", label="unigram baseline")
        ax.legend(fontsize=8)
    lesson.save(fig, "training")


# %%
data = char_data()
steps = lesson.pick(60, 250)
with one_blas_thread():
    runs = [train(data, KEYS, steps, seed, lesson.pick(20, 25)) for seed in range(lesson.seeds)]
    models, _, val = runs[0]
    ids = val[:64, :-1]
    maps = {}
    for label, model in (("trained", models["layernorm"]), ("untrained", transformer(data.vocab_size, "layernorm",
                                                                                   seed=5))):
        seen = captured_inputs(model, ids)
        maps[label] = [input_output(norm, x) for norm, x in seen.items()]
    x, dy = np.random.default_rng(19).standard_normal((2, BATCH * T, D))
    layers = {"layernorm": sn.LayerNorm(D), "rmsnorm": sn.RMSNorm(D), "dyt": sn.DyT(D)}
    layer_t = interleaved_medians({n: (lambda m=m: (m.forward(x), m.backward(dy))) for n, m in layers.items()},
                                  lesson.pick(100, 1000))
curves = {key: [r[1][key] for r in runs] for key in KEYS}
for key, cs in curves.items():
    check(all(np.all(np.isfinite(c.loss)) for c in cs), f"{key}: the validation loss stays finite")
    report(lesson, f"  {key}: final validation loss per seed " + ", ".join(f"{final(c):.3f}" for c in cs)
           + f", {np.median([c.step_time for c in cs]) * 1e3:.2f} ms/step")
slopes = {label: [float(np.nanmedian(tail_slope(xi, y))) for xi, y in m] for label, m in maps.items()}
claims(lesson, curves, slopes, layer_t, data.unigram_loss())
figures(lesson, maps["trained"], slopes, curves, data.unigram_loss())

# %%
lesson.finish()
