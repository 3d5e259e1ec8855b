# %% [markdown]
# # Precision: float16, bfloat16 and float32 against a float64 reference, and where eps goes.
#
# scratchnorm's NumPy reference, used here, computes every statistic in float64 and rounds once at the end
# (`scratchnorm/dtypes.py`); float16 inputs are upcast first. Two things remain: the input is already
# rounded to its format, and the output is rounded to it. A feature with mean $m$ and spread $s$ in float16
# keeps about 11 bits of $m + s z$, so what is left of $z$ has a relative error of about
#
# $$
# 2^{-11} \cdot \frac{m}{s} .
# $$
#
# LayerNorm divides by $s$ and shows that error at full size; RMSNorm divides by
# $\mathrm{RMS} = \sqrt{m^2 + s^2}$, so its output is about $1 + z\, s/m$ and its error, on the output's
# scale, stays at $2^{-11}$.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numpy as np

import scratchnorm as sn
from lessons._common import APPROX, COMMON, FAILS, HOLDS, check, explainer, start
from lessons._grading import above, below, exactly
from lessons._precision import (F16, dtype_sweep, err, half_square_rms_norm, library, naive_layer_norm,
                                naive_rms_norm, variance_errors)

lesson = start(__name__, "08_precision")

# %% [markdown]
# ## Each format against float64
#
# Rows of $d = 256$ standard normal features $z$ are shifted to a growing mean, $x = z + m$, and normalized
# in each format by the library's path (input rounded, statistics in float64, output rounded) and, for
# float16, by a naive path that does every operation in float16 (the `naive_*` functions of
# `lessons/_precision.py`). The error is the worst row's RMS error against the float64 output.
#
# The figure: output error against mean/std, per format, for LayerNorm and RMSNorm (library path, and naive
# float16), and the error of the part of the output that varies across features.

# %%
D = 256
rng = np.random.default_rng(8)
z = rng.standard_normal((lesson.pick(100, 1000), D))

means, c = dtype_sweep(lesson, z, D)
check(np.all(c[("RMSNorm", "float32")] < 1e-6), "float32 with float64 statistics is accurate")
big = means == means.max()
ratio_out = (c[("LayerNorm", "float16")] / c[("RMSNorm", "float16")])[big][0]
ratio_dev = (c[("RMSNorm", "float16, varying part")] / c[("LayerNorm", "float16, varying part")])[big][0]
never_worse = np.all(c[("RMSNorm", "float16")] <= 1.5 * c[("LayerNorm", "float16")])
naive_fails = {name: means[np.argmax(c[(name, "naive float16")] > 0.1)] for name in ("LayerNorm", "RMSNorm")}
check(all(c[(name, "naive float16")][-1] > 0.1 for name in naive_fails), "naive float16 breaks at large means")
check(never_worse, "RMSNorm's float16 output error is never much above LayerNorm's")
lesson.claim("RMSNorm is numerically more stable than LayerNorm in FP16/BF16: its output is closer to the "
             "float64 output", source=explainer("003", "§2.5 table"),
             measured=f"mean/std = {means.max():g}: output error LN/RMS {ratio_out:.0f}× (fp16; the value), bf16 "
                      f"{c[('LayerNorm', 'bfloat16')][big][0]:.2f} vs {c[('RMSNorm', 'bfloat16')][big][0]:.3f}; "
                      f"pure fp16 arithmetic: error > 0.1 from mean/std = {naive_fails['RMSNorm']:.0f} (RMSNorm), "
                      f"{naive_fails['LayerNorm']:.0f} (LayerNorm)",
             value=ratio_out, **above(3, approx=1.5), expect=HOLDS)

# %% [markdown]
# Look closer: the part of RMSNorm's output that varies across features, $z\, s/m$, is tiny, and rounding
# the output (near 1) to float16 swamps it. "RMSNorm is more stable in half precision" is true of the
# output's error, not of the information it carries. The next claim compares the error of
# $y - \mathrm{mean}(y)$, relative to $\mathrm{std}(y)$, at the largest mean.

# %%
lesson.claim("... and so RMSNorm's FP16 output carries the input's variation more precisely",
             source=explainer("003", "§2.5 table"),
             measured=f"mean/std = {means.max():g}: the error of y − mean(y), relative to std(y), is "
                      f"{ratio_dev:.1f}× larger for RMSNorm than for LayerNorm (the value: RMS/LN)",
             value=ratio_dev, **below(1.0, approx=1.5), expect=FAILS)

# %% [markdown]
# ## Without the upcast: overflow
#
# With every operation in float16 (the lesson's `naive_*` functions) both layers break: $x^2$ overflows
# float16 for $|x| > 256$ (65504 is the largest float16), the sum of $d$ squares already for
# $\mathrm{RMS}(x) > \sqrt{65504 / d} = 16$ at $d = 256$, and a float16 running sum of values near 100
# rounds each addition to a multiple of 16. A third path squares in float16 and accumulates the mean in
# float32, as explainers 002 and 003 write it (lesson 14 runs their code): the sum no longer overflows, but
# the square already has. Hugging Face's LlamaRMSNorm casts to float32 before it squares, as the library does.
# Where the mean of squares overflows, rsqrt gives 0 and the row comes out as zeros, whose error is 1 (the
# output's RMS); a NaN or inf would be drawn at 50.
#
# The figure: naive float16 against the library as the input's scale grows.

# %%
big16 = np.nextafter(F16(256), F16(0))
with np.errstate(over="ignore"):
    check(np.isfinite(big16 * big16) and np.isinf(F16(256) * F16(256)), "x^2 overflows float16 at 256")
    scales = np.logspace(-3, 3, lesson.pick(13, 25))
    f16 = np.arange(0x7C00, dtype=np.uint16).view(F16)             # every finite non-negative float16
    first_inf = float(f16[np.argmax(np.isinf(f16 * f16))])          # the smallest x with x*x = inf
    fig, ax = plt.subplots(figsize=(7.5, 6), layout="constrained")
    for name, fwd, naive, color, lw in [("RMSNorm", sn.rms_norm_forward, naive_rms_norm, "tab:blue", 3.5),
                                        ("LayerNorm", sn.layer_norm_forward, naive_layer_norm, "tab:orange", 1.5)]:
        lib = [min(err(library("float16", fwd, s * z), fwd(s * z)[0]), 50) for s in scales]   # NaN/inf at 50
        nai = [min(err(naive(s * z), fwd(s * z)[0]), 50) for s in scales]
        ax.loglog(scales, lib, "o-", color=color, ms=4, lw=lw, label=f"{name}, library (float32 upcast)")
        ax.loglog(scales, nai, "x--", color=color, ms=5, lw=lw, label=f"{name}, all float16 (one add at a time)")
    half_sq = [min(err(half_square_rms_norm(s * z), sn.rms_norm_forward(s * z)[0]), 50) for s in scales]
    ax.loglog(scales, half_sq, "d:", color="tab:green", ms=5,
              label="RMSNorm, x² in float16, mean in float32 (explainers 002, 003)")
    lib_big = err(library("float16", sn.rms_norm_forward, 1000 * z), sn.rms_norm_forward(1000 * z)[0])
check(lib_big < 1e-3, "the library's float16 path survives |x| ~ 1000")
ax.axvline(np.sqrt(65504 / D), color="k", linestyle=":", label=f"RMS = √(65504/d) = {np.sqrt(65504 / D):.0f}")
ax.axvline(first_inf / 3, color="tab:green", linestyle=":", label="RMS = 256/3: some |x| ≥ 256")
ax.axhline(1.0, color="0.5", lw=0.8, ls="--")
ax.text(1.2e-3, 1.3, "error 1: the row came out as zeros", fontsize=8, color="0.3")
ax.set(xlabel="RMS(x)  (mean 0)", ylabel="worst row's RMS error (NaN/inf would show at 50)",
       title=f"float16 without a full upcast, d = {D}", ylim=(1e-5, 1e2))
fig.legend(loc="outside lower center", ncol=2, fontsize=8)
lesson.save(fig, "overflow")
lesson.claim("x² overflows float16 for |x| ≥ 256, even when the mean of squares is accumulated in float32",
             source=COMMON,
             measured=f"the smallest float16 x with x·x = inf is {first_inf:g} (the value; {float(big16)}² = "
                      f"{float(big16 * big16):g}); a float16 sum of {D} squares overflows from RMS(x) = "
                      f"{np.sqrt(65504 / D):.0f}; library path at RMS 1000: error {lib_big:.1e}",
             value=first_inf, **exactly(256), expect=HOLDS)

# %% [markdown]
# ## The variance in one pass
#
# The variance as $\mathrm{E}[x^2] - \mathrm{E}[x]^2$ subtracts two numbers of size $m^2$ to get one of size
# $s^2$: it loses $\log_{10}(m^2/s^2)$ digits (catastrophic cancellation) and can even go negative
# ($\sqrt{\cdot} \to$ NaN). Two passes (mean, then squared deviations) or Welford's running update avoid it.
# RMSNorm's mean of squares adds positive numbers only: no cancellation, in one pass.
#
# The figure: the relative error of the variance, one pass, two passes and Welford in float32, against
# mean/std.

# %%
ratios = np.logspace(0, 6, lesson.pick(7, 13))
rows = z[: lesson.pick(50, 200)]
var, negative = variance_errors(rows, ratios)
at = ratios == 1e3
fig, ax = plt.subplots(figsize=(7, 4.4))
for (key, v), style in zip(var.items(), ("o-", "s-", "^-", "d:")):
    ax.loglog(ratios, np.maximum(v, 1e-9), style, ms=4, label=key)
ax.axhline(1, color="0.5", linewidth=0.8)
ax.set(xlabel="mean(x) / std(x)", ylabel="max relative error", ylim=(1e-9, 1e8),
       title=f"float32 statistics, d = {D}: one pass gives a variance ≤ 0 in up to {max(negative):.0%} of rows")
ax.legend(fontsize=8)
lesson.save(fig, "variance")

# %% [markdown]
# Two claims, graded at mean/std $= 10^3$: the cancellation, and whether LayerNorm really needs two passes
# (Welford computes its variance in one pass, at the price of a division per element).

# %%
one_err, two_err, w_err, ms_err = (var[k][at][0] for k in var)
check(two_err < 1e-5 and ms_err < 1e-5, "two passes and the mean of squares stay accurate")
lesson.claim("E[x²] − E[x]² cancels catastrophically when the mean is large against the spread",
             source=f"{COMMON} (users' bug reports)",
             measured=f"float32, mean/std = 1e3: relative error {one_err:.1e} (two passes {two_err:.1e}); "
                      f"variance ≤ 0 in {max(negative):.0%} of rows at mean/std = "
                      f"{ratios[np.argmax(negative)]:.0e}",
             value=one_err, **above(1e-2, approx=1e-4), expect=HOLDS)
lesson.claim("RMSNorm needs one pass over the data for its statistic, LayerNorm two",
             source=explainer("000", "§2.2, §10.1"),
             measured=f"float32, mean/std = 1e3: RMSNorm's one-pass mean of squares {ms_err:.1e}; LayerNorm in one "
                      f"pass with Welford {w_err:.1e} (the value; a division per element), two passes "
                      f"{two_err:.1e}. Holds if one pass cannot give LayerNorm's variance to 1%",
             value=w_err, **above(1e-2, approx=1e-4), expect=lesson.pick((APPROX, FAILS), FAILS))

# %% [markdown]
# ## Where eps goes
#
# Near 0 (see `scratchnorm/eps_modes.py`) the three placements of $\epsilon$ differ:
#
# | mode | normalizer | capped at |
# |---|---|---|
# | inside | $1/\sqrt{\overline{x^2} + \epsilon}$ | $1/\sqrt{\epsilon}$ |
# | clamp | $1/\sqrt{\max(\overline{x^2}, \epsilon)}$ | $1/\sqrt{\epsilon}$ |
# | outside | $1/(\mathrm{RMS}(x) + \epsilon)$ | $1/\epsilon$ |
#
# so the gradient of "outside" can be $1/\sqrt{\epsilon}$ times larger ($10^6$ against $10^3$ for
# $\epsilon = 10^{-6}$). For inputs well above $\sqrt{\epsilon}$ the three agree; where $\epsilon$ goes
# matters only for small inputs. The measurement: a vector of 8 features with RMS 1, scaled down from 1 to
# $10^{-8}$; RMSNorm's backward with $dy = I$ gives its Jacobian.
#
# The figure: the output's RMS and the gradient's gain (largest singular value of the Jacobian) as
# $\mathrm{RMS}(x) \to 0$, for the three eps modes.

# %%
u = rng.standard_normal(8)
u /= np.sqrt(np.mean(u**2))                           # RMS 1
levels = np.logspace(-8, 0, lesson.pick(33, 65))
eps = 1e-6
fig, axes = plt.subplots(1, 2, figsize=(12, 4.3), constrained_layout=True)
gain_at_zero, out_at, out_at_1 = {}, {}, {}
for mode in ("inside", "outside", "clamp"):
    outs, gains = [], []
    for t in levels:
        x = np.tile(t * u, (8, 1))                    # 8 copies; dy = I gives the Jacobian's rows
        y, cache = sn.rms_norm_forward(x, eps=eps, eps_mode=mode)
        J = sn.rms_norm_backward(np.eye(8), cache)["x"]
        outs.append(np.sqrt(np.mean(y[0] ** 2)))
        gains.append(np.linalg.norm(J, 2))
    axes[0].loglog(levels, outs, label=mode)
    axes[1].loglog(levels, gains, label=mode)
    gain_at_zero[mode], out_at[mode], out_at_1[mode] = gains[0], outs[np.searchsorted(levels, 1e-4)], outs[-1]
for ax, ylabel in zip(axes, ("RMS of the output", "gradient gain ‖∂y/∂x‖₂")):
    ax.axvline(np.sqrt(eps), color="0.5", linestyle=":", label="√eps")
    ax.axvline(eps, color="0.5", linestyle="--", label="eps")
    ax.set(xlabel="RMS(x)", ylabel=ylabel)
    ax.legend()
axes[0].set_title(f"output, eps = {eps:g}")
axes[1].set_title("the largest factor by which backward amplifies dy")
lesson.save(fig, "eps")

# %% [markdown]
# Graded at $\mathrm{RMS}(x) = 1$, where the three should agree, and at $\mathrm{RMS}(x) = 10^{-4}$, between
# $\epsilon$ and $\sqrt{\epsilon}$.

# %%
check(abs(gain_at_zero["outside"] * eps - 1) < 0.01 and abs(gain_at_zero["inside"] * np.sqrt(eps) - 1) < 0.01,
      "near 0 the gain is 1/eps (outside) and 1/sqrt(eps) (inside)")
spread_1 = max(out_at_1.values()) - min(out_at_1.values())
spread_small = max(out_at.values()) / min(out_at.values())
lesson.claim("Where eps goes does not matter (inputs of RMS 1)", source=COMMON,
             measured=f"at RMS(x) = 1 the output RMS of the three modes differs by {spread_1:.0e} (the value)",
             value=spread_1, **below(1e-5, approx=1e-3), expect=HOLDS)
lesson.claim("Where eps goes does not matter; it only prevents division by zero (inputs near 0)", source=COMMON,
             measured=f"at RMS(x) = 1e-4 the output RMS is {out_at['inside']:.2f} (inside), "
                      f"{out_at['outside']:.2f} (outside), {out_at['clamp']:.2f} (clamp): the value is the "
                      f"largest over the smallest, {spread_small:.2f}; gradient gain near 0: "
                      f"{gain_at_zero['inside']:.0e}, {gain_at_zero['outside']:.0e}, {gain_at_zero['clamp']:.0e}",
             value=spread_small, **below(1.1, approx=2), expect=FAILS)

# %% [markdown]
# ## Questions
#
# **1.** At the largest mean, RMSNorm's float16 output is much closer to float64 than LayerNorm's, yet the
# part of it that varies across features is less precise. How can both be true?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"Both inherit the input's own rounding, about 2^-11 m/s of z; LayerNorm shows it at full size, "
              f"RMSNorm shrinks it by s/m together with the signal, so its output error is {ratio_out:.0f}x "
              f"smaller. But its output sits near 1, where float16's spacing is as large as the variation "
              f"z s/m, so rounding the output adds a second error: the varying part comes out {ratio_dev:.1f}x "
              f"worse than LayerNorm's.")

# %% [markdown]
# **2.** In float32 at mean/std $= 10^3$ the one-pass variance is far off, while RMSNorm's one-pass mean of
# squares is accurate. What differs between the two sums?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"E[x²] and E[x]² are both about a million times the variance, and float32 keeps about 7 digits, "
              f"so their difference keeps about one: relative error {one_err:.1e}. The mean of squares adds "
              f"positive numbers and subtracts nothing ({ms_err:.1e}); one pass is not the problem, since "
              f"Welford's one pass gets LayerNorm's variance to {w_err:.1e}.")

# %% [markdown]
# **3.** At $\mathrm{RMS}(x) = 10^{-4}$ with $\epsilon = 10^{-6}$, why does "outside" keep the output's RMS
# near 1 while "inside" and "clamp" shrink it?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"Inside divides by sqrt(1e-8 + 1e-6), about 1e-3, ten times the input's RMS (output "
              f"{out_at['inside']:.2f}), and clamp by sqrt(eps) as well ({out_at['clamp']:.2f}); outside divides "
              f"by 1e-4 + 1e-6, barely more than the RMS ({out_at['outside']:.2f}). The price: its normalizer "
              f"and gradient gain grow up to 1/eps near 0 ({gain_at_zero['outside']:.0e}, against "
              f"{gain_at_zero['inside']:.0e} inside).")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    "'RMSNorm is numerically more stable in half precision' (closer to float64): "
    + lesson.result("numerically more stable") + "; 'so it carries the input's variation more precisely': "
    + lesson.result("carries the input's variation") + ".",
    "'x^2 overflows float16 from |x| = 256, even with a float32 mean': " + lesson.result("x² overflows")
    + "; 'E[x^2] - E[x]^2 cancels catastrophically': " + lesson.result("cancels catastrophically") + ".",
    "'Where eps goes does not matter', near zero: " + lesson.result("(inputs near 0)") + ".")

# %%
lesson.finish()
