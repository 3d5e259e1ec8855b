# %% [markdown]
# # The explainers' code, run: what their demos print, what their casts do, what their defaults give.
#
# Lessons 01 to 13 test what the explainers *say*. This one runs what they *wrote*, transcribed into NumPy
# operation by operation, with the same dtypes (PyTorch's float16 arithmetic rounds each operation to
# float16, as NumPy's does; a mean of float16 values is accumulated in float32 and rounded once).

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numpy as np

from lessons._common import COMMON, FAILS, check, explainer, start
from lessons._grading import above, below, exactly
from lessons._precision import ulp_error
from lessons._style import color
from scratchnorm import batch_norm_forward, layer_norm_forward, rms_norm_forward

lesson = start(__name__, "14_the_explainers_code")

# %% [markdown]
# ## Explainer 001's demo
#
# The demo prints an input vector, its RMSNorm and its LayerNorm, and "RMS of the output ~1.000". The
# printed input is enough to recompute both outputs with the demo's own code ($\epsilon = 10^{-6}$ and
# $10^{-5}$, weights 1, bias 0): the lesson compares.

# %%
# Explainer 001's printed demo (its example output): the input, then RMSNorm's and LayerNorm's outputs.
DEMO_X = [-0.5041, 0.8920, -0.4989, -1.3071, 0.4685, -0.1527, 1.4497, -0.7099]
DEMO_RMS = [-0.3534, 0.6250, -0.3496, -0.9160, 0.3284, -0.1070, 1.0161, -0.4977]
DEMO_LN = [-0.4298, 0.7589, -0.4252, -1.1102, 0.3987, -0.1299, 1.2321, -0.6036]
x = np.array(DEMO_X)
rms, ln = rms_norm_forward(x, eps=1e-6)[0], layer_norm_forward(x, eps=1e-5)[0]
off = max(np.max(np.abs(rms - DEMO_RMS)), np.max(np.abs(ln - DEMO_LN)))
ratio = np.array(DEMO_RMS) / x
lesson.claim("Explainer 001's demo prints what its code computes for its printed input",
             source=explainer("001", "§四 (demo)"),
             measured=f"largest |printed − computed| over both outputs: {off:.3f} (the value; printing"
             f" to 4 decimals allows 5e-5); the printed 'RMSNorm' output is the input times "
             f"{ratio.mean():.4f} (spread {np.ptp(ratio):.1e}); the printed 'LayerNorm' output has mean "
             f"{np.mean(DEMO_LN):+.3f}, where any LayerNorm output has mean 0",
             value=off, **below(5e-5, approx=5e-3), expect=FAILS)
printed_rms = float(np.sqrt(np.mean(np.square(DEMO_RMS))))
lesson.claim("The RMS of the demo's RMSNorm output is ~1.000, as it prints", source=explainer("001", "§四 (demo)"),
             measured=f"the RMS of the printed output is {printed_rms:.3f}; of the code's output "
                      f"{np.sqrt(np.mean(rms ** 2)):.6f}; value: |RMS(printed) − 1|",
             value=abs(printed_rms - 1), **below(5e-4, approx=0.05), expect=FAILS)

# %% [markdown]
# The figure: explainer 001's printed outputs against what its code gives for its printed input.

# %%
fig, ax = plt.subplots(figsize=(7.5, 4.2))
idx = np.arange(len(x))
ax.plot(idx, x, "k.-", label="printed input")
for vals, code, label in ((DEMO_RMS, rms, "RMSNorm"), (DEMO_LN, ln, "LayerNorm")):
    ax.plot(idx, vals, "o", color=color(label), mfc="none", label=f"{label}: printed by the demo")
    ax.plot(idx, code, "x", color=color(label), label=f"{label}: what its code gives")
ax.set(xlabel="feature", ylabel="value", title="Explainer 001's demo: printed against computed")
ax.legend(fontsize=8, ncol=2)
lesson.save(fig, "demo")

# %% [markdown]
# ## Half precision
#
# The largest float16 is 65504, so $x^2$ overflows from $|x| = 256$. Explainer 003's ByteRMSNorm computes
# `mean((x*x).float())`, and its text credits the `.float()` with avoiding overflow in half precision.
# Explainer 002's RMSNorm computes `x.pow(2).mean(-1)` and has an `x.float()` in its product; 002 states no
# purpose for the cast. The lesson transcribes both and grades the claim on the row's output as $|x|$ grows
# (what goes wrong, and why it shows as it does, is the second question at the end).
#
# Neither explainer says how often it rounds, but a reader may ask: ByteRMSNorm rounds rsqrt to float16,
# then $x \cdot \mathrm{rsqrt}$, then the product with the weight (three roundings, with the module in half
# precision as for half inference: weight float16); 002 rounds rsqrt, then $\hat x$ (`type_as`), then the
# product with the weight. One rounding of the exact result is off by at most half an ulp (the unit of
# lessons 08 and 17: the spacing of float16 at the exact value); each extra rounding can add another. The
# two transcriptions, the library's one rounding, and their worst error in ulps:

# %%
F16, F32 = np.float16, np.float32


def byte_rms_norm(x, weight, eps):
    """Explainer 003's ByteRMSNorm, float16, in its order of operations; three roundings."""
    ms = np.mean((x * x).astype(F32), axis=-1, keepdims=True)       # mean((x*x).float()), as written
    inv = (1 / np.sqrt(np.maximum(ms, F32(eps)))).astype(F16)       # rsqrt, clamp, .to(x.dtype)
    return (x * inv) * weight


def rms_norm_002(x, weight, eps):
    """Explainer 002's RMSNorm, in its order of operations: x.pow(2).mean(), x.float(), type_as(x), the weight."""
    ms = np.mean(x * x, axis=-1, keepdims=True, dtype=F32).astype(F16)   # a half mean of half squares
    inv = (1 / np.sqrt((ms + F16(eps)).astype(np.float64))).astype(F16)    # torch.rsqrt in half: one rounding
    x_hat = (x.astype(F32) * inv).astype(F16)                             # x.float() * ..., then .type_as(x)
    return weight * x_hat


def one_rounding(x, weight, eps):
    return rms_norm_forward(x, weight, eps=eps)[0]                  # float64 inside, one rounding to float16


def half_sweep(rng, d, rows):
    """Each implementation's worst error in float16 ulps, and whether it zeroed a row, per input scale."""
    z = rng.standard_normal((rows, d))
    z /= np.max(np.abs(z), axis=1, keepdims=True)                    # each row's largest |x| is 1
    weight = rng.uniform(0.5, 2, d).astype(F16)
    tops = np.geomspace(1, 2 ** 15, 31)
    names = ("one rounding (library)", "explainer 003 ByteRMSNorm", "explainer 002 RMSNorm")
    errs, zeroed = ({n: [] for n in names} for _ in range(2))
    for top in tops:
        x = (z * top).astype(F16)
        exact = rms_norm_forward(x.astype(np.float64), weight.astype(np.float64), eps=1e-6)[0]
        for name, fn in zip(names, (one_rounding, byte_rms_norm, rms_norm_002)):
            with np.errstate(over="ignore", invalid="ignore"):
                y = fn(x, weight, 1e-6)
            errs[name].append(float(np.max(ulp_error(y, exact, F16))))
            zeroed[name].append(bool(np.any(np.all(y == 0, axis=1))))
    return tops, {k: np.array(v) for k, v in errs.items()}, {k: np.array(v) for k, v in zeroed.items()}


# %% [markdown]
# Rows of 64 features are scaled so that their largest $|x|$ grows from 1 to $2^{15}$. ByteRMSNorm's
# overflow claim is its source's; the rounding rows are the common reading of such a cast, graded on the
# explainers' code, below $|x| = 256$ where nothing overflows.

# %%
rng = np.random.default_rng(14)                  # also the BatchNorm section's
tops, errs, zeroed = half_sweep(rng, 64, lesson.pick(16, 128))
first_bad = {k: float(tops[np.argmax(v)]) if np.any(v) else np.inf for k, v in zeroed.items()}
check(first_bad["one rounding (library)"] == np.inf, "the library's float16 path never zeros a row")
check(np.all(np.isfinite(np.concatenate(list(errs.values())))), "no NaN or inf: an overflow zeros the row")
library_worst = float(errs["one rounding (library)"].max())
for key, source, what in (("explainer 003 ByteRMSNorm", explainer("003", "§6"), "its .float() upcast"),
                          ("explainer 002 RMSNorm", COMMON, "an x.float() upcast as in its code")):
    below_256 = errs[key][tops < 256]
    lesson.claim(f"{key}: {what} keeps float16 inputs from overflowing", source=source,
                 measured=f"rows of 64 features whose largest |x| grows from 1 to 32768: the first largest |x| "
                          f"at which the row comes out as zeros is {first_bad[key]:.0f} (the value; float16's "
                          f"largest value is 65504)",
                 value=min(first_bad[key], 65504.0), **above(65504), expect=FAILS)
    lesson.claim(f"The float16 code of {key.split()[0]} {key.split()[1]} rounds its output once", source=COMMON,
                 measured=f"worst error below |x| = 256: {below_256.max():.2f} ulp (the value), against "
                          f"{library_worst:.2f} ulp for the library's one rounding (one rounding is off by at most "
                          "half an ulp)",
                 value=float(below_256.max()), **below(0.5 + 1e-6, approx=1.0), expect=FAILS)

# %% [markdown]
# The figure: the error of the three float16 RMSNorms (one rounding; 003's; 002's) against the row's largest
# $|x|$, in float16 ulps on a log axis. A zeroed row is drawn at its true error (every output is off by its
# whole value) and marked with a cross.

# %%
fig, ax = plt.subplots(figsize=(7.5, 4.4))
for (name, v), style, c in zip(errs.items(), ("o-", "s--", "^:"), (color("RMSNorm"), "0.15", "0.55")):
    ax.semilogx(tops, v, style, ms=4, label=name, color=c)
    ax.semilogx(tops[zeroed[name]], v[zeroed[name]], "x", color=ax.lines[-1].get_color(), ms=9, mew=2)
ax.semilogx([], [], "x", color="k", ms=9, mew=2, label="a row came out as zeros")
ax.axvline(256, color="k", lw=0.8, ls=":")
ax.axhline(0.5, color="0.4", lw=0.8, ls="--", label="half an ulp: one rounding")
ax.text(300, 3, "256² > 65504: from here the\nsquare overflows", fontsize=8)
ax.set(xlabel="the row's largest |x| (64 features, float16)", ylabel="worst error, float16 ulps (log)",
       yscale="log", title="RMSNorm in float16: one rounding against the explainers' casts")
ax.legend(loc="upper left", fontsize=8)
lesson.save(fig, "half")

# %% [markdown]
# ## eps = 1e-8 in float16
#
# Explainer 000's default $\epsilon = 10^{-8}$ is there to prevent division by zero. The cell divides an
# all-zero row by $\sqrt{\mathrm{mean}(x^2) + \epsilon}$ in float16 and in float32 and counts the NaNs.

# %%
eps16 = float(F16(1e-8))
with np.errstate(invalid="ignore", divide="ignore"):
    zero_row = np.zeros((1, 8), F16)
    nans, nans32 = (int(np.isnan(row / np.sqrt(np.mean(row * row, axis=-1, keepdims=True) + t(1e-8))).sum())
                    for row, t in ((zero_row, F16), (zero_row.astype(F32), F32)))
lesson.claim("eps = 1e-8 prevents division by zero", source=explainer("000", "§5.1"),
             measured=f"an all-zero row of 8 gives {nans} NaN of 8 in float16 (the value); in float32, {nans32}; "
                      f"float16(1e-8) = {eps16:g}",
             value=nans, **exactly(0), expect=FAILS)

# %% [markdown]
# ## Explainer 002's BatchNorm
#
# Two things. Its running variance is updated with the biased batch variance (divided by $n$); PyTorch, like
# the paper's frameworks, stores the unbiased one (divided by $n - 1$), and the two differ by $(n-1)/n$ at
# the inference it is used for.

# %%
def running_var_ratio(rng, n, steps=300, momentum=0.1):
    """Explainer 002's running_var (biased batch variance) over PyTorch's (unbiased), both from the same batches."""
    biased, unbiased = 1.0, 1.0
    for _ in range(steps):
        b = rng.standard_normal(n) * 2.0
        biased = (1 - momentum) * biased + momentum * b.var()
        unbiased = (1 - momentum) * unbiased + momentum * b.var(ddof=1)
    return biased / unbiased


n = 8
r = running_var_ratio(rng, n)
lesson.claim("Explainer 002's BatchNorm keeps the running variance as PyTorch does", source=explainer(
             "002", "§1.3.1 (1) code"), measured=f"batches of {n}, 300 updates: its running_var over PyTorch's "
             f"(unbiased) is {r:.3f}, (n − 1)/n = {(n - 1) / n:.3f}; the value is |ratio − 1|",
             value=abs(r - 1), **below(1e-3, approx=0.02), expect=FAILS)

# %% [markdown]
# And it broadcasts the statistics with `.unsqueeze(0).unsqueeze(-1)`, shape $(1, C, 1)$: right for
# $(N, C, L)$, but for $(N, C, H, W)$ NumPy and PyTorch align shapes from the right, so $C$ meets $H$: an
# error when $C \ne H$, and silently wrong statistics when $C = H$.

# %%
def bn_002(x, eps=1e-5):
    """Explainer 002's BatchNorm forward in training mode (weight 1, bias 0), its broadcast kept."""
    dims = (0, *range(2, x.ndim))
    mean, var = x.mean(dims), x.var(dims)
    return (x - mean[None, :, None]) / np.sqrt(var[None, :, None] + eps)


x4 = rng.standard_normal((3, 4, 4, 5)) * rng.uniform(0.5, 3, (1, 4, 1, 1)) + rng.uniform(-2, 2, (1, 4, 1, 1))
y4 = bn_002(x4)
per_channel_mean = float(np.max(np.abs(y4.mean(axis=(0, 2, 3)))))
check(np.allclose(bn_002(x4[..., 0]), batch_norm_forward(x4[..., 0])[0], atol=1e-6), "(N, C, L) is right")
try:
    bn_002(rng.standard_normal((3, 4, 5, 6)))
    raises = "no error"
except ValueError as exc:
    raises = f"ValueError ({str(exc)[:40]}...)"
lesson.claim("Explainer 002's BatchNorm normalizes each channel of an (N, C, H, W) input", source=explainer(
             "002", "§1.3.1 (1) code"), measured=f"C = H = 4: the largest per-channel mean of its output is "
             f"{per_channel_mean:.2f} (the value; a BatchNorm output's is 0); C = 4, H = 5: {raises}",
             value=per_channel_mean, **below(1e-6, approx=1e-3), expect=FAILS)

# %% [markdown]
# ## Questions
#
# **1.** RMSNorm's output is its input times a constant, and so is the demo's printed "RMSNorm" output. What
# gives the printed one away?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"The constant: RMSNorm divides by the input's RMS, 1/RMS(x) = {1 / np.sqrt(np.mean(x ** 2)):.4f} "
              f"here, so its output has RMS 1 ({np.sqrt(np.mean(rms ** 2)):.6f}); the printed output is the input "
              f"times {ratio.mean():.4f}, and its RMS is {printed_rms:.3f}, not the ~1.000 the demo prints.")

# %% [markdown]
# **2.** ByteRMSNorm casts to float32 to avoid overflow, yet its row comes out as zeros from $|x| = 256$ on.
# Why zeros, and not NaN or an error?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"The square is taken in float16 before the cast: 256² = 65536 is above 65504, so x*x is inf, "
              f"the float32 mean of it is inf, and 1/sqrt(inf) is 0, so every finite x times 0 gives 0 (first "
              f"zeroed row here at largest |x| = {first_bad['explainer 003 ByteRMSNorm']:.0f}): no NaN, no error, "
              "just a wrong answer. Explainer 002's RMSNorm squares the half input too: its x.float() multiplies "
              "afterwards. (Hugging Face's LlamaRMSNorm casts to float32 before it squares, as the library does.)")

# %% [markdown]
# **3.** The same $\epsilon = 10^{-8}$ keeps an all-zero row finite in float32 but not in float16. Why?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"float32 holds 1e-8, so the row computes 0/sqrt(1e-8) = 0 ({nans32} NaN); float16's smallest "
              f"subnormal is 6e-8, 1e-8 rounds to {eps16:g}, and the row computes 0/sqrt(0) = 0/0 = NaN "
              f"({nans} of 8).")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    "'Explainer 001's demo prints what its code computes': " + lesson.result("demo prints what its code") + ".",
    "The explainers' float16 code squares before it upcasts; '003's .float() keeps float16 from overflowing', "
    "graded on the first |x| whose row comes out as zeros: " + lesson.result("ByteRMSNorm: its .float()") + ".",
    "'eps = 1e-8 prevents division by zero' (in float16 it rounds to 0): " + lesson.result("eps = 1e-8 prevents")
    + ".")

# %%
lesson.finish()
