# %% [markdown]
# # Precision in practice: bfloat16, float16 and float32 through the three places models round.
#
# Lesson 08 measured the formats; this one measures the code that models run. With a narrow input,
# implementations of RMSNorm agree on the formula,
#
# $$
# y = \hat x \odot w, \qquad \hat x = \frac{x}{\sqrt{\tfrac{1}{d}\sum_i x_i^2 + \epsilon}},
# $$
#
# and disagree on where they round back to the input's dtype (`scratchnorm/casts.py`;
# `RMSNorm(d, cast=...)`):
#
# * `"gemma"`: everything in float32 or wider, one rounding at the end,
#   $y = \mathrm{round}(\hat x \odot w)$. Gemma; this library's default.
# * `"llama"`: statistics in float32, $\hat x$ rounded before the weight, the weight held in the input's
#   dtype, $y = \mathrm{round}(\mathrm{round}(\hat x) \odot \mathrm{round}(w))$. LLaMA, most Hugging Face
#   RMSNorms.
# * `"none"`: every operation in the input's dtype. A naive port.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
from decimal import Decimal, localcontext

import matplotlib.pyplot as plt
import ml_dtypes
import numpy as np

import scratchnorm as sn
from scratchnorm.dtypes import round_to
from lessons._common import COMMON, FAILS, HOLDS, check, start
from lessons._grading import above, below, exactly
from lessons._precision import ulp_error

lesson = start(__name__, "17_precision_in_practice")

# %% [markdown]
# ## The setup: activations, and error in ulps
#
# Rows of $d = 512$ activations with a few large channels (as trained LLMs have: here 4 channels 30 times
# larger than the rest), and a weight near 1. Each mode's output is compared with the exact result on the
# same rounded input, in units of the output format's spacing (ulps) at each value: with $p$ the format's
# fraction bits,
#
# $$
# \mathrm{error} = \frac{|y - y_{\mathrm{exact}}|}{2^{\lfloor \log_2 |y_{\mathrm{exact}}| \rfloor - p}} .
# $$
#
# The exact result does not come from the library (grading the library against itself would prove
# nothing): `exact_rms_norm` computes the formula in Python's `decimal` arithmetic with 40 significant
# digits, from the rounded input and the weight, and only then rounds to float64, 2^-53 relative, far below
# any format's ulp here.

# %%
BF16 = np.dtype(ml_dtypes.bfloat16)
FORMATS = {"bfloat16": BF16, "float16": np.dtype(np.float16), "float32": np.dtype(np.float32)}
CASTS = ("gemma", "llama", "none")
D, EPS = 512, 1e-6
GEMMA = f"{COMMON} (Gemma's RMSNorm forms 1 + w in float32)"


def exact_rms_norm(x, w, eps=EPS):
    """y = x w / sqrt(mean(x^2) + eps) in 40-digit decimal arithmetic (every float converts to Decimal exactly),
    rounded to float64 once at the end: an exact reference independent of NumPy and of the library."""
    rows = []
    with localcontext() as ctx:
        ctx.prec = 40
        wd = [Decimal(float(v)) for v in w]
        for row in np.asarray(x, dtype=np.float64):
            xd = [Decimal(float(v)) for v in row]
            rstd = 1 / (sum(v * v for v in xd) / len(xd) + Decimal(eps)).sqrt()
            rows.append([float(v * rstd * g) for v, g in zip(xd, wd)])
    return np.array(rows)


def activations(rng, rows):
    """N(0, 1) rows with 4 channels 30x larger (LLM-like outliers), and a weight near 1."""
    x = rng.standard_normal((rows, D))
    x[:, [7, 100, 300, 411]] *= 30.0
    return x, 1.0 + 0.1 * rng.standard_normal(D)


# %% [markdown]
# ## The three modes against float64
#
# One rounding of the exact result is at most half an ulp, and no output can do better: the claim is that
# `"gemma"` reaches that bound. The cell measures the worst and the median error of each mode in each format
# against the decimal reference.

# %%
rng = np.random.default_rng(17)
x64, w = activations(rng, lesson.pick(32, 256))
errors = {}
for fmt, dt in FORMATS.items():
    x = x64.astype(dt)
    exact = exact_rms_norm(x, w)                                     # the formula on the rounded input
    for cast in CASTS:
        layer = sn.RMSNorm(D, eps=EPS, cast=cast, backend="numpy")
        layer.params["weight"] = w
        e = ulp_error(layer.forward(x), exact, dt)
        errors[fmt, cast] = (float(e.max()), float(np.median(e)))
        check(np.isfinite(e).all(), f"{fmt} {cast}: finite output")
worst_gemma = max(errors[f, "gemma"][0] for f in FORMATS)
lesson.claim("Rounding once at the end (Gemma's order) keeps RMSNorm's output within half an ulp of the "
             "exact result, in every format", source=GEMMA,
             measured=f"{x64.shape[0]} rows of {D}; worst error in ulps of the output format against a 40-digit "
                      "decimal reference, gemma / llama / none: "
                      + "; ".join(f"{f} " + " / ".join(f"{errors[f, c][0]:.2f}" for c in CASTS) for f in FORMATS)
                      + f"; value: the worst of gemma's ({worst_gemma:.4f})",
             value=worst_gemma, **below(0.5 + 1e-6), expect=HOLDS)

# %% [markdown]
# ## A third rounding: the cast itself
#
# Found while writing this lesson: ml_dtypes casts float64 to bfloat16 through float32, which rounds twice,
# and on some values lands on the other bfloat16 neighbour than one rounding gives. The library rounds once
# (`dtypes.round_to`: float32 rounded to odd, then bfloat16); the lesson counts how often the plain cast is
# wrong on standard normal values.

# %%
a = rng.standard_normal(lesson.pick(100_000, 2_000_000))
wrong = int(np.sum(a.astype(BF16) != round_to(a, BF16)))
lesson.claim("A float64 -> bfloat16 cast (ml_dtypes' astype) is correctly rounded", source=COMMON,
             measured=f"{wrong} of {a.size} standard normal float64 values (the value) land on the other "
                      "bfloat16 neighbour than one rounding gives: the cast goes through float32",
             value=wrong, **exactly(0), expect=FAILS)

# %% [markdown]
# ## LLaMA's order
#
# `"llama"` rounds $\hat x$, then the product $\hat x \odot w$ (with $w$ already rounded to the input's
# dtype): up to three roundings. `"none"` adds one per step. The claim compares the worst error of
# `"llama"` with that of `"gemma"` in bfloat16.

# %%
bf_ratio = errors["bfloat16", "llama"][0] / errors["bfloat16", "gemma"][0]
lesson.claim("Casting x_hat to the input dtype before the weight (LLaMA's order) costs accuracy",
             source=COMMON,
             measured="worst / median error in ulps, gemma vs llama: "
                      + "; ".join(f"{f} {errors[f, 'gemma'][0]:.2f} / {errors[f, 'gemma'][1]:.3f} vs "
                                  f"{errors[f, 'llama'][0]:.2f} / {errors[f, 'llama'][1]:.3f}" for f in FORMATS)
                      + f"; value: llama's worst over gemma's in bfloat16 ({bf_ratio:.2f}; holds from 1.5, "
                      "a further rounding's worth)",
             value=bf_ratio, **above(1.5, approx=1.0), expect=HOLDS)

# %% [markdown]
# The figure: the worst and the median error in ulps, per format and mode; the dotted line is half an ulp,
# what one rounding costs.

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), sharey=False, layout="constrained")
width = 0.25
for ax, (k, title) in zip(axes, ((0, "worst"), (1, "median"))):
    for i, cast in enumerate(CASTS):
        vals = [errors[f, cast][k] for f in FORMATS]
        ax.bar(np.arange(len(FORMATS)) + (i - 1) * width, vals, width, label=f'cast="{cast}"')
    ax.axhline(0.5, color="k", ls=":", lw=1, label="half an ulp: one rounding")
    ax.set(xticks=range(len(FORMATS)), xticklabels=list(FORMATS), ylabel="error, ulps of the output format",
           title=f"RMSNorm, d = {D}: {title} error against the exact result")
    ax.set_ylim(0, 1.12 * max(max(errors[f, c][k] for f in FORMATS for c in CASTS), 0.5))
fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=4, fontsize=9)
lesson.save(fig, "error")

# %% [markdown]
# ## Trap 1: Gemma's $1 + w$
#
# Gemma multiplies by $1 + w$ and starts $w$ at 0. A bfloat16 number near 1 keeps 8 bits: the spacing is
# $2^{-7} \approx 0.0078$ just above 1 and $2^{-8}$ just below, so $1 + 0.0039$ (half a spacing, a tie)
# rounds to 1, and every $w$ from $-0.00195$ to $0.0039$ vanishes. A model that forms $1 + w$ in bfloat16
# cannot learn a small $w$. Gemma forms it in float32 (`"gemma"` mode). The cell runs `GemmaRMSNorm` on
# bfloat16 input with $w = 0$ and $w = 0.0039$, forming $1 + w$ in bfloat16 (`cast="none"`) and in float32.

# %%
one_bf, one_16 = (float((np.ones(1, dt) + np.full(1, 0.0039, dt))[0]) for dt in (BF16, np.float16))
xb = x64[:8].astype(BF16)
outs = {}
for cast in ("gemma", "none"):
    for wv in (0.0, 0.0039):
        g = sn.GemmaRMSNorm(D, cast=cast, backend="numpy")
        g.params["weight"] = np.full(D, wv)
        outs[cast, wv] = g.forward(xb).astype(np.float64)
lost = np.array_equal(outs["none", 0.0], outs["none", 0.0039])
kept = float(np.mean(outs["gemma", 0.0039] != outs["gemma", 0.0]))
check(lost and kept > 0.1, "the weight vanishes only when 1 + w is formed in bfloat16")
lesson.claim("In bfloat16, 1 + 0.0039 rounds to 1: a zero-centered weight must be added in float32",
             source=GEMMA,
             measured=f"bfloat16(1) + bfloat16(0.0039) = {one_bf} (the value; float16 keeps it: {one_16:.5f}); "
                      f"GemmaRMSNorm with w = 0.0039 on bfloat16 input: cast='none' gives exactly the output of "
                      f"w = 0, cast='gemma' changes {kept:.0%} of the outputs",
             value=one_bf, **exactly(1.0), expect=HOLDS)

# %% [markdown]
# The figure: $1 + w$ after rounding to bfloat16 and to float16, against the exact line: the staircase.

# %%
ws = np.linspace(-0.03, 0.03, 1201)
fig, ax = plt.subplots(figsize=(7, 4))
for name, dt, color in (("bfloat16", BF16, "tab:red"), ("float16", np.dtype(np.float16), "tab:blue")):
    scale = (np.ones_like(ws).astype(dt) + ws.astype(dt)).astype(np.float64)
    ax.plot(ws, scale, color=color, label=f"1 + w formed in {name}")
ax.plot(ws, 1 + ws, color="k", ls=":", label="exact (float32 and wider)")
def one_plus(v):
    return float((np.ones(1, BF16) + np.full(1, v, BF16))[0])


ends = (-2.0 ** -9, 2.0 ** -8)                                     # both ends are ties, and go to the even 1
outside = [np.nextafter(BF16.type(v), BF16.type(2 * v)) for v in ends]   # the next bfloat16 beyond each end
check(all(one_plus(v) == 1.0 for v in ends) and all(one_plus(v) != 1.0 for v in outside),
      "in bfloat16, 1 + w = 1 exactly for -2^-9 <= w <= 2^-8, and not beyond")
ax.axvspan(-2 ** -9, 2 ** -8, color="tab:red", alpha=0.12, label="lost in bfloat16: −2⁻⁹ ≤ w ≤ 2⁻⁸")
ax.set(xlabel="learned weight w (Gemma starts it at 0)", ylabel="the scale 1 + w the model applies",
       title="GemmaRMSNorm's 1 + w after rounding")
ax.legend(fontsize=8)
lesson.save(fig, "one_plus_w")

# %% [markdown]
# ## Trap 2: $\epsilon = 10^{-8}$ in float16
#
# float16's smallest number is about $6 \times 10^{-8}$: $\epsilon = 10^{-8}$ (pRMSNorm's default, and the
# RMSNorm paper's code) rounds to 0, and an all-zero row divides 0 by 0. bfloat16 has float32's range and
# holds $10^{-8}$. The library refuses `cast="none"` with such an $\epsilon$ rather than return NaN; the
# other modes add $\epsilon$ in float32 or wider.

# %%
e16, ebf = float(np.float16(1e-8)), float(BF16.type(1e-8))
try:
    sn.RMSNorm(D, eps=1e-8, cast="none", backend="numpy").forward(np.zeros((1, D), np.float16))
    refused = False
except ValueError:
    refused = True
safe = sn.RMSNorm(D, eps=1e-8, backend="numpy").forward(np.zeros((1, D), np.float16))
check(refused and np.all(safe == 0), "the library refuses the zero eps and the default mode returns 0")
lesson.claim("float16 cannot hold eps = 1e-8: it rounds to 0 (an all-zero row then gives 0/0)", source=COMMON,
             measured=f"float16(1e-8) = {e16} (the value), bfloat16(1e-8) = {ebf:.3g}; cast='none' with that "
                      f"eps raises a ValueError; cast='gemma' gives 0 for an all-zero row",
             value=e16, **exactly(0.0), expect=HOLDS)
lesson.claim("bfloat16 needs no larger eps than float32 (it has float32's range)", source=COMMON,
             measured=f"bfloat16(1e-8) = {ebf:.4g}, relative rounding {abs(ebf - 1e-8) / 1e-8:.1e} "
                      "(the value: 1 if it were lost)",
             value=abs(ebf - 1e-8) / 1e-8, **below(2.0 ** -8), expect=HOLDS)

# %% [markdown]
# ## Which half format is safer?
#
# float16 has the finer spacing (a float16 ulp is 8 times finer than a bfloat16 ulp). The last claim asks
# whether that makes it the safer format for the naive port: `safe_scale` scales the rows up, $\max |x|$ from
# $1$ to $10^8$, and finds the largest scale at which `cast="none"` stays within 8 ulps of the float64 output.

# %%
SCALES = np.logspace(0, 8, 33)


def safe_scale(x64, w, dt, scales=SCALES):
    """The largest max |x| (x64 scaled) at which RMSNorm with cast='none' in ``dt`` is within 8 ulps of float64."""
    ok = 0.0
    for s in scales:
        with np.errstate(over="ignore"):
            x = (x64 * s / np.abs(x64).max()).astype(dt)
        if not np.all(np.isfinite(x.astype(np.float64))):
            break                                         # beyond the format's range
        ref, layer = (sn.RMSNorm(D, cast=c, backend="numpy") for c in ("gemma", "none"))
        ref.params["weight"] = layer.params["weight"] = w
        with np.errstate(over="ignore", invalid="ignore"):
            y = layer.forward(x).astype(np.float64)
        if np.all(ulp_error(y, ref.forward(x.astype(np.float64)), dt) <= 8):
            ok = s
    return ok


safe = {f: safe_scale(x64[:16], w, FORMATS[f]) for f in ("float16", "bfloat16")}
lesson.claim("float16 is the safer half format for RMSNorm, being the more precise", source=COMMON,
             measured="worst error of cast='none' in ulps of its own format: float16 "
                      f"{errors['float16', 'none'][0]:.1f}, bfloat16 {errors['bfloat16', 'none'][0]:.1f} (a "
                      "float16 ulp is 8x finer); largest input scale (max |x|) at which cast='none' stays within "
                      f"8 ulps of the float64 output: float16 {safe['float16']:.3g}, bfloat16 "
                      f"{safe['bfloat16']:.3g} (the largest tried)"
                      f"; value: float16's over bfloat16's ({safe['float16'] / safe['bfloat16']:.2g})",
             value=safe["float16"] / safe["bfloat16"], **above(1.0, approx=0.5), expect=FAILS)

# %% [markdown]
# ## Questions
#
# **1.** Gemma's order never errs by more than half an ulp. Why can no implementation do better, and what
# does LLaMA's order cost on top?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"The output must be a number of the format and the exact result lies between two of them, so the "
              f"nearest is up to half a spacing away: one rounding at the end reaches that bound (worst "
              f"{worst_gemma:.3f} ulp). LLaMA's order rounds w, x_hat and then their product, and the errors add "
              f"up: {errors['bfloat16', 'llama'][0]:.2f} ulps in bfloat16, {bf_ratio:.1f} times gemma's worst.")

# %% [markdown]
# **2.** ml_dtypes' cast through float32 is wrong on only a handful of values. Why so rarely?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
example = np.array([0.18017578733131004])            # the value that showed it (scratchnorm/dtypes.py)
via32, twice, once = (float(v[0]) for v in (example.astype(np.float32),            # the first rounding
                                            example.astype(BF16), round_to(example, BF16)))   # twice; once
check(twice < via32 == (twice + once) / 2 < example[0] < once, "the example is a tie in float32, broken downward")
lesson.answer(f"Double rounding errs only when the first rounding, to float32, lands exactly halfway between two "
              f"bfloat16 numbers (the 16 bits bfloat16 then drops read 1 and 15 zeros: about one value in 2^16), "
              f"and only when the tie goes the other way than the float64 value, half of those: {wrong} of "
              f"{a.size} here, against about {a.size / 2 ** 17:.1f} expected. {example[0]:.11g} is one: it becomes "
              f"{via32:.11g} in float32, exactly halfway between two bfloat16 numbers, and the tie goes to the "
              f"even one, {twice:.10g}, below, though the float64 value was above the halfway point; one rounding "
              f"gives {once:.10g}.")

# %% [markdown]
# **3.** float16 has 8 times finer ulps than bfloat16, yet the claim that it is the safer half format for
# the naive port fails. What breaks it?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
nxt = SCALES[SCALES > safe["float16"]][0]
lesson.answer(f"Range: cast='none' rounds x^2 and the sum of the squares to float16, whose largest number is 65504: "
              f"fine at max |x| = {safe['float16']:.3g}, they overflow at {nxt:.3g}, the next scale tried. bfloat16 "
              f"has float32's range and stays within 8 ulps up to {safe['bfloat16']:.3g}, the largest scale tried.")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    f"Rounding once at the end (Gemma's order) stays within half an ulp of the exact result ({worst_gemma:.3f} "
    f"ulp); LLaMA's order costs {bf_ratio:.1f} times that in bfloat16.",
    "In bfloat16, 1 + w = 1 for -2^-9 <= w <= 2^-8: Gemma's 1 + w must be formed in float32; in float16, eps = "
    "1e-8 rounds to 0.")

# %%
lesson.finish()
