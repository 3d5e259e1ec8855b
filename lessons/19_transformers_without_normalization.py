# %% [markdown]
# # Transformers without normalization? DyT's observation and its claims, on the tiny Transformer.
#
# DyT (Zhu et al. 2025; `scratchnorm.DyT`, its backward in `scratchnorm/dyt.py`) replaces each norm by an
# elementwise
#
# $$
# y = \tanh(\alpha x) \odot w + b,
# $$
#
# with $\alpha$ a learnable scalar ($\alpha_0 = 0.5$ by default) and no statistic at all, so no reduction over
# the features. The paper starts from an observation: plotted against its input, a trained Transformer's
# LayerNorm output traces an S-shaped, tanh-like curve. The lesson measures that curve in a trained model
# and in an untrained one; where the S-shape comes from is the first question at the end.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import time

import numpy as np

import scratchnorm as sn
from lessons._common import APPROX, HOLDS, VERDICTS, check, start, work
from lessons._corpus import char_data
from lessons._grading import below, control
from lessons._stats import mean_interval
from lessons._training import interleaved_medians, interval, one_blas_thread, race, report, seeds_to_decide, warm_up
from lessons._training_plots import plot_dyt_race, plot_norm_map
from scratchnorm import nn

lesson = start(__name__, "19_transformers_without_normalization")

# %% [markdown]
# ## Training the six models
#
# A tiny Transformer on lesson 12's data (Python's docstrings, characters): $d = 32$, 2 heads, 2 pre-norm
# blocks, contexts of 16 characters, with LayerNorm, RMSNorm and DyT ($\alpha_0$ = 0.1, 0.5 and 2) as its
# norms, and with none (each block $h + F(h)$, no final norm): the control of DyT's claim below. The six models
# of a seed start from the same weights (`seed=s`), train on the same batches of 16
# windows (drawn from `default_rng(190 + s)`), Adam at the rate lesson 12 uses, and are evaluated on the same
# 256 validation windows, for each seed (`--seeds`, default 5). The cell prints each model's final validation
# loss (the mean of the last two evaluations) per seed.
#
# The models train on the library's default backend, numba's kernels, at least as fast as NumPy's inside a
# training step (`scratchnorm/fast/NOTES.md`); a step of these small models is bound by the toolkit's Python,
# so no backend buys the many more seeds some rows would need (the takeaways compute how many, and the minutes).

# %%
KEYS = ("layernorm", "rmsnorm", ("dyt", 0.5), ("dyt", 0.1), ("dyt", 2.0), "none")   # a norm, DyT and its alpha0, none
D, HEADS, LAYERS, T, BATCH = 32, 2, 2, 16, 16
LR, BETAS = 3e-3, (0.9, 0.99)


def transformer(key, seed):
    name, alpha0 = key if isinstance(key, tuple) else (key, 0.5)
    norm = (lambda d: sn.DyT(d, alpha0=alpha0)) if name == "dyt" else name
    return nn.Transformer(data.vocab_size, D, HEADS, LAYERS, T, norm=norm, seed=seed)


def train(seed):
    """The six models raced on the same batches: ({key: model}, {key: Curve})."""
    rng = np.random.default_rng(190 + seed)
    batches = [(w[:, :-1], w[:, 1:]) for w in (data.windows("train", BATCH, T + 1, rng) for _ in range(steps))]
    models = {key: transformer(key, seed) for key in KEYS}
    warm_up([transformer(key, 99) for key in KEYS[:3]], *batches[0])     # compile before the clock runs
    runs = {key: (m, nn.Adam(m, lr=LR, betas=BETAS)) for key, m in models.items()}
    return models, race(runs, batches, lambda m: float(ce.forward(m.forward(val[:, :-1]), val[:, 1:])),
                        lesson.pick(20, 25))


def final(curve):
    return float(np.mean(curve.loss[-2:]))          # the last two evaluations


data, ce = char_data(), nn.SoftmaxCrossEntropy()
unigram, steps = data.unigram_loss(), lesson.pick(60, 250)
val = data.windows("val", 256, T + 1, np.random.default_rng(191))
with one_blas_thread():
    t0 = time.perf_counter()
    runs = [train(seed) for seed in range(lesson.seeds)]
    seed_seconds = (time.perf_counter() - t0) / len(runs)             # one seed's race of the six models
curves = {key: [r[1][key] for r in runs] for key in KEYS}
for key, cs in curves.items():
    check(all(np.all(np.isfinite(c.loss)) for c in cs), f"{key}: the validation loss stays finite")
    report(lesson, f"  {key}: final validation loss per seed " + ", ".join(f"{final(c):.3f}" for c in cs)
           + f", {np.median([c.step_time for c in cs]) * 1e3:.2f} ms/step")

# %% [markdown]
# ## The observation, measured
#
# The LayerNorm model of the first seed, trained briefly; then for each LayerNorm and each channel, the slope
# of its output (before the affine) against its input, fitted on the tokens in the tails of that channel's
# input (beyond the 95th percentile of $|x - \mathrm{median}|$), over the slope in the middle half:
#
# $$
# \frac{\text{slope in the tails}}{\text{slope in the middle}} .
# $$
#
# A straight line gives 1; a curve that squashes the extremes, less. The same number is taken on the
# untrained model. The inputs are those each LayerNorm receives in one forward
# pass on 64 validation windows (each norm's `forward` is wrapped for that pass, then restored).

# %%
TAIL, CENTER = 0.95, 0.50       # quantiles of |x - median| per channel: the tails, the middle


def layer_norms(layer):
    """Every LayerNorm inside ``layer``, depth first."""
    if isinstance(layer, sn.LayerNorm):
        return [layer]
    return [n for child in getattr(layer, "children", {}).values() for n in layer_norms(child)]


def normalized(model, ids):
    """Per LayerNorm, in forward order: its input x (tokens, d) in one forward on ``ids``, and x_hat."""
    seen = {}
    for norm in layer_norms(model):
        def forward(x, norm=norm, original=norm.forward):
            seen[norm] = np.array(x)
            return original(x)
        norm.forward = forward
    try:
        model.forward(ids)
    finally:
        for norm in layer_norms(model):
            del norm.forward                      # back to the class's method
    xs = {norm: x.reshape(-1, x.shape[-1]).astype(np.float64) for norm, x in seen.items()}
    return [(x, (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + norm.eps))
            for norm, x in xs.items()]


def tail_slope(x, y):
    """Per channel (d,): the least-squares slope of y on x in the tails of x over the slope in the middle."""
    out = []
    for j in range(x.shape[1]):
        dev = np.abs(x[:, j] - np.median(x[:, j]))
        slopes = []
        for mask in (dev >= np.quantile(dev, TAIL), dev <= np.quantile(dev, CENTER)):
            xs, ys = x[mask, j], y[mask, j]
            slopes.append(np.polyfit(xs, ys, 1)[0] if np.ptp(xs) > 0 else np.nan)
        out.append(slopes[0] / slopes[1])
    return np.array(out)


with one_blas_thread():
    maps = {"trained": normalized(runs[0][0]["layernorm"], val[:64, :-1]),
            "untrained": normalized(transformer("layernorm", 5), val[:64, :-1])}
slopes = {label: [float(np.nanmedian(tail_slope(xi, y))) for xi, y in m] for label, m in maps.items()}
trained = float(np.median(slopes["trained"]))
lesson.claim("A trained Transformer's LayerNorm maps its input to an S-shaped, tanh-like curve (the extremes "
             "squashed)", source=work("dyt", "tanh-like mappings"),
             measured="slope of the output on the input in the tails over the slope in the middle, median over "
                      "channels, per LayerNorm (input to output): trained "
                      + ", ".join(f"{s:.2f}" for s in slopes["trained"]) + "; untrained "
                      + ", ".join(f"{s:.2f}" for s in slopes["untrained"])
                      + f"; value: the trained model's median ({trained:.2f}; 1 for a straight line)",
             value=trained, **below(0.9, approx=0.97), expect=(HOLDS, APPROX))

# %% [markdown]
# The figure: left, one trained LayerNorm's output (before the affine) against its input, for the four
# channels with the largest inputs; right, the tail slope over the middle slope per LayerNorm, trained and
# untrained.

# %%
plot_norm_map(lesson, maps, slopes)

# %% [markdown]
# ## DyT against the norms, and its $\alpha_0$
#
# What this setting can and cannot show. The paper's claims come from models thousands of times larger
# (ViT, DiT, LLaMA 7B to 70B), trained for far longer, with its own recipes; this project read its abstract
# and public summaries, not its experiments section by section (`lessons/SOURCES.md`). Here the model has
# $d = 32$ and a few blocks and trains for a few hundred steps. So a verdict here is about this setting:
# "holds" would say that DyT's claim carries down to a tiny, briefly trained model; "does not hold", that it
# does not carry down to it (which says nothing about the paper's models: a short run favours whichever layer
# starts fastest, and DyT's $\alpha$ has to be learned); "inconclusive", that the seeds cannot tell. The text
# does not know the outcome before the run.
#
# The comparison is the final validation loss, DyT(0.5) minus each norm, paired per seed, with a 95%
# interval, graded beside its control: the Transformer without a norm, minus LayerNorm, on the same seeds. "Match"
# is a bound of 0.03 nats (0.1 approximately), and it says something only if no norm fails it; if no norm
# "matches" too, the claim is inconclusive by construction (`lessons/_grading.py`, `beside_control`). And for
# $\alpha_0$, per seed the spread of the three final losses, the largest minus the smallest: the three runs of a
# seed share their weights and batches, so the spread is what changing $\alpha_0$ alone did to that run, and
# "insensitive" says it stays small. (An earlier version graded the worst $\alpha_0$ minus the best, the two chosen
# by their means on the very seeds it graded: a choice made by looking. The spread chooses nothing. It counts a
# run that $\alpha_0$ moves up on one seed and down on another, which a difference of means would average away.)

# %%
k = len(curves["layernorm"])
alphas = (0.1, 0.5, 2.0)
gap = mean_interval([final(d) - final(n) for d, n in zip(curves["dyt", 0.5], curves["layernorm"])])
rms_gap = mean_interval([final(d) - final(n) for d, n in zip(curves["dyt", 0.5], curves["rmsnorm"])])
none_gap = mean_interval([final(d) - final(n) for d, n in zip(curves["none"], curves["layernorm"])])
bounds = below(0.03, approx=0.1)
lesson.claim("Transformers with DyT in place of their norms match or exceed the normalized ones",
             source=work("dyt", "abstract"),
             measured=f"d = {D}, {LAYERS} blocks, {steps} steps: final validation loss, DyT(0.5) minus LayerNorm, "
                      f"paired per seed: {interval(*gap, n=k)}; minus RMSNorm: {interval(*rms_gap, n=k)} (unigram "
                      f"baseline {unigram:.3f}); graded on the LayerNorm interval (holds if all of it is at most "
                      f"0.03 nats worse); the control, no norm minus LayerNorm: {interval(*none_gap, n=k)}",
             value=gap[0], interval=gap[1:], **bounds,
             control=control("no norm against LayerNorm", none_gap[0], none_gap[1:]), expect=VERDICTS)
behind_none = mean_interval([final(d) - final(n) for d, n in zip(curves["dyt", 0.5], curves["none"])])
no_norm = (f"{lesson.claims[-1].control['verdict']} ({interval(*none_gap)} nats); DyT(0.5) minus no norm, "
           f"paired: {interval(*behind_none)} nats")
means = {a: float(np.mean([final(c) for c in curves["dyt", a]])) for a in alphas}
per_seed = np.array([[final(c) for c in curves["dyt", a]] for a in alphas])      # (alphas, seeds)
spread = mean_interval(per_seed.max(axis=0) - per_seed.min(axis=0))             # per seed: largest - smallest
lesson.claim("Outside large language models, training with DyT is insensitive to alpha0 (0.5 works)",
             source=work("dyt", "initialization of alpha"),
             measured=f"d = {D}, {LAYERS} blocks, {steps} steps: final validation loss, mean over seeds, alpha0 = "
                      + ", ".join(f"{a:g}: {v:.3f}" for a, v in means.items())
                      + f"; per seed, the largest minus the smallest of the three: "
                      f"{interval(*spread, n=k)} (holds if all of it is at most 0.03 nats)",
             value=spread[0], interval=spread[1:], **below(0.03, approx=0.1), expect=VERDICTS)
open_alpha = seeds_to_decide(lesson.claims[-1], k, seed_seconds)          # '' once decided

# %% [markdown]
# The figure: validation loss against steps (band: min–max over seeds) and against seconds for LayerNorm,
# RMSNorm, DyT(0.5) and no norm, and DyT for the three $\alpha_0$ against LayerNorm (means over seeds); the dotted grey
# line is the unigram baseline.

# %%
plot_dyt_race(lesson, curves, unigram, f"Tiny Transformer (d = {D}, {LAYERS} pre-norm blocks) on Python's docstrings, "
                                       f"{steps} steps")

# %% [markdown]
# ## The layers timed alone
#
# DyT has no reduction over the features; whether that makes it faster is the claim. The cell times the
# forward and backward of each layer alone (DyT's kernel: `scratchnorm/fast/dyt.py`) on the activations'
# shape, float64. A time depends on the machine and its load: the verdict is recorded and graded
# (`timed=True`), never asserted, and the text does not announce it.

# %%
with one_blas_thread():
    x, dy = np.random.default_rng(19).standard_normal((2, BATCH * T, D))
    layers = {"layernorm": sn.LayerNorm(D), "rmsnorm": sn.RMSNorm(D), "dyt": sn.DyT(D)}
    layer_t = interleaved_medians({n: (lambda m=m: (m.forward(x), m.backward(dy))) for n, m in layers.items()},
                                  lesson.pick(100, 1000))
ratio = layer_t["dyt"] / layer_t["rmsnorm"]
lesson.claim("DyT is faster than RMSNorm: it has no reduction", source=work("dyt", "efficiency"),
             measured=f"forward + backward of the layer alone, numba kernels, ({BATCH * T}, {D}) float64: "
                      + ", ".join(f"{n} {t * 1e6:.1f} us" for n, t in layer_t.items())
                      + f"; value: DyT / RMSNorm ({ratio:.2f}; holds at most 0.9)",
             value=ratio, **below(0.9, approx=1.0), timed=True, expect=VERDICTS)

# %% [markdown]
# ## Questions
#
# **1.** The untrained model's LayerNorms squash the extremes too. Where does the S-shape come from, if not
# from training?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
untrained = float(np.median(slopes["untrained"]))
lesson.answer(f"From the division by each token's own standard deviation: a token with an extreme value in one "
              f"channel has a large standard deviation too, so its output is pulled in. The untrained model has "
              f"the division, and its median tail slope is {untrained:.2f}, against {trained:.2f} trained.")

# %% [markdown]
# **2.** What does $\alpha_0$ set in $\tanh(\alpha x)$, and how much did DyT's final loss depend on it here?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer("alpha0 is alpha's starting value, so it sets where the tanh bends when training starts: for "
              "|alpha x| well below 1 DyT is nearly linear, beyond it values are squashed toward -1 and 1. Here the "
              "final losses (means over seeds) were " + ", ".join(f"{v:.3f} at {a:g}" for a, v in means.items())
              + f", and per seed the largest ended {interval(*spread, n=k)} nats above the smallest, against the "
              "0.03 the claim allows.")

# %% [markdown]
# **3.** DyT saves RMSNorm's reduction. Why need that not make it faster, and what did this run time?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"The reduction is cheap: one multiply-add per element for the mean square, one square root per row. "
              f"DyT computes a tanh per element (and its derivative in the backward), which costs many operations, "
              "even vectorized as scratchnorm/fast/dyt.py writes it. "
              f"Here DyT took {ratio:.2f} times RMSNorm's time ({layer_t['dyt'] * 1e6:.0f} us against "
              f"{layer_t['rmsnorm'] * 1e6:.0f} us), a timing of this machine at this moment.")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    "'A trained LayerNorm's map is tanh-like': " + lesson.result("tanh-like curve") + "; 'DyT matches or exceeds "
    "the normalized models', in this tiny short setting: " + lesson.result("match or exceed") + "; its control, no "
    "norm against LayerNorm on the same bound: " + no_norm + ".",
    "'DyT is insensitive to alpha0': " + lesson.result("insensitive to alpha0") + (f"; {open_alpha}" if open_alpha
                                                                                    else "") + ".",
    "'DyT is faster than RMSNorm': " + lesson.result("DyT is faster") + ".")

# %%
lesson.finish()
