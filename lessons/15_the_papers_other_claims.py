# %% [markdown]
# # The paper's other claims: its hypothesis, eq. 8, LayerNorm as a re-centred RMSNorm, and what bounds ||W||.
#
# Four statements of the paper besides its headline, each measured or checked: the hypothesis that re-centring is
# dispensable (§1), the scale invariance of the gradients of the gain and bias (eq. 8), LayerNorm written as
# RMSNorm of re-centred weights (§4), and what keeps $\lVert W\rVert$ from growing (§4.2).

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numpy as np

import scratchnorm as sn
from lessons._common import COMMON, FAILS, HOLDS, VERDICTS, check, paper, start
from lessons._grading import above, below
from lessons._stats import first_crossing, geometric_interval, mean_interval
from lessons._style import color
from lessons._training import interval, report

lesson = start(__name__, "15_the_papers_other_claims")

# %% [markdown]
# ## The hypothesis (§1)
#
# LayerNorm's re-centring is dispensable: it does not reduce the variance of hidden states or of gradients,
# and re-scaling alone gives the benefit. §1 puts it beside the usual reason for re-centring: LayerNorm's
# output is unchanged when the inputs or the weights are shifted by noise. The lesson measures both
# variances on lesson 04's layer, normalized by LayerNorm or by RMSNorm, on the same data and weights for both:
# ReLU features $h$ ($n$ examples of $d_{in} = 48$), $a = hW$ ($d = 64$), $y = \mathrm{Norm}(a)$ without affine,
# and $L = \frac{1}{B}\sum_b \tfrac{1}{2}(y_b \cdot r - t_b)^2$ with a fixed readout $r$, centred
# ($\sum_i r_i = 0$; lesson 04 says why), and a teacher's targets $t$. The two measures: the variance across
# examples of each unit of $y$, averaged over the units, and the noise of $\partial L/\partial W$ across
# minibatches of $B = 32$ (lesson 04's measure, $\overline{\lVert G_b - G\rVert^2}/\lVert G\rVert^2$ with
# $G_b$ a minibatch's gradient and $G$ their mean).
#
# Re-centring can only matter where the vector normalized, $a$, has a row mean; with zero-mean random weights
# it has almost none, even on positive ReLU features (lesson 04), and the two norms then coincide. Lesson 04
# gives $a$ a steady mean (every weight raised by a common amount) and finds where re-centring starts to pay
# for the gradients. This lesson takes the case §1 names, **shift noise**: zero-mean weights $W_0$, and a random
# amount added to every unit of each example's $a$ (a normal draw $z_n$ per example, times a dose $\sigma$ of
# $a$'s row std under $W_0$): a row mean that is 0 on average and changes from example to example. The dose
# is read on $a$ itself: the spread, between examples, of its row mean/std.
#
# ### The hidden states' variance is algebra, not a claim
#
# Write a row as $a = m\mathbf{1} + s\,\hat{x}$ ($m$ its mean, $s$ its std, $\hat{x}$ its LayerNorm output) and
# $q = m/s$. At $\epsilon = 0$, $\mathrm{RMSNorm}(a) = (\hat{x} + q\mathbf{1})/\sqrt{1 + q^2}$ exactly. Take the
# variance of unit $j$ across examples and average over the units. Every row of $\hat{x}$ has mean 0 and mean
# square 1, so with $\mu_j$ the mean of unit $j$ of $\hat{x}$ and $M = \overline{\mu_j^2}$, LayerNorm's variance is
# $1 - M$. If $q$ varies independently of $\hat{x}$, RMSNorm's is $1 - M A^2 - B^2$ with
# $A = \mathrm{E}[1/\sqrt{1+q^2}]$ and $B = \mathrm{E}[q/\sqrt{1+q^2}]$ (means over the examples). So
#
# $$\frac{\mathrm{Var}_{\mathrm{LN}}}{\mathrm{Var}_{\mathrm{RMS}}} = \frac{1 - M}{1 - M A^2 - B^2},$$
#
# which is $1 + m^2/s^2$ when $q$ is the same in every example. The ratio follows from $q$'s distribution
# alone, so the lesson does not grade it. The cell computes the prediction from each seed's $a$ at every dose
# and checks it against the measured ratio.
#
# The gradients' noise has no such closed form: it goes through the readout, the targets and the minibatch
# sums, and it is graded, over the doses, as a curve. At $\sigma = 0$ the two norms nearly coincide (a check).
# The claim is read where the curve crosses the bound: the dose at which LayerNorm's noise-to-signal falls to
# 0.9 times RMSNorm's, found on each seed's curve by interpolation, with its 95% interval over the seeds.
# "Re-centring is dispensable" holds if it starts to pay only where the row mean/std varies by at least 2
# between examples (approximately: by at least 1); an interval wholly below 1 says it pays for milder noise.

# %%
NORMS = {"LayerNorm": (sn.layer_norm_forward, sn.layer_norm_backward),
         "RMSNorm": (sn.rms_norm_forward, sn.rms_norm_backward)}


def layer(seed, n, d_in=48, d=64):
    """Lesson 04's layer and zero-mean weights, and a shift-noise draw per example: h (n, d_in), W0 (d_in, d),
    readout r (d,), targets t (n,), z (n, 1)."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((n, d_in))
    h = np.maximum(u @ rng.standard_normal((d_in, d_in)) / np.sqrt(d_in), 0.0)   # ReLU features, mean > 0
    W0 = rng.standard_normal((d_in, d)) / np.sqrt(d_in)                           # entries N(0, 1/d_in)
    r = rng.standard_normal(d) / np.sqrt(d)
    r -= r.mean()                                                                 # centred: sum(r) = 0
    t = np.tanh(u @ rng.standard_normal(d_in) / np.sqrt(d_in))                    # a teacher's targets
    return h, W0, r, t, rng.standard_normal((n, 1))


def noise_to_signal(forward, backward, a, h, r, t, batch=32):
    """Lesson 04's noise-to-signal of dL/dW (a = hW + shift noise) over the minibatches of ``batch`` rows."""
    G = []
    for s in range(0, len(h) - batch + 1, batch):
        y, cache = forward(a[s:s + batch], eps=1e-5)                   # (B, d)
        dy = np.outer(y @ r - t[s:s + batch], r) / batch               # dL/dy, (B, d)
        G.append(h[s:s + batch].T @ backward(dy, cache)["x"])          # dL/dW = h^T dL/da, (d_in, d)
    G = np.array(G)                                                    # (minibatches, d_in, d)
    return float(np.mean(np.sum((G - G.mean(axis=0)) ** 2, axis=(1, 2))) / np.sum(G.mean(axis=0) ** 2))


# %% [markdown]
# The measurement: for each dose and each seed (a seed draws the data, $W_0$, $r$, the teacher and $z$), the
# vector normalized $a$, the spread of its row mean/std, and both measures for both norms on that same $a$;
# the ratio LayerNorm/RMSNorm is taken per seed. The hidden states' ratio is checked against the derivation's
# prediction from the same $a$; the gradients' curve gives, per seed, the dose where it crosses 0.9.

# %%
def predicted_variance_ratio(a):
    """Var_LN / Var_RMS from the derivation: (1 - M) / (1 - M A^2 - B^2), q = row mean / row std of a (n, d)."""
    q = a.mean(axis=1) / a.std(axis=1)                                 # (n,)
    M = np.mean(((a - a.mean(axis=1, keepdims=True)) / a.std(axis=1, keepdims=True)).mean(axis=0) ** 2)
    A, B = np.mean(1 / np.sqrt(1 + q ** 2)), np.mean(q / np.sqrt(1 + q ** 2))
    return (1 - M) / (1 - M * A ** 2 - B ** 2)


rng = np.random.default_rng(15)
seeds, n = range(lesson.pick(3, 24)), lesson.pick(1024, 4096)
DOSES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.5, 2.0)       # sigma: shift noise in row stds of h W0
ratios = {what: np.zeros((len(seeds), len(DOSES))) for what in ("hidden states", "predicted", "gradients")}
spread = np.zeros((len(seeds), len(DOSES)))                           # the dose on a: std of its row mean/std
for i, seed in enumerate(seeds):
    h, W0, r, t, z = layer(seed, n)
    for j, sigma in enumerate(DOSES):
        a = h @ W0 + z * sigma * float(np.mean((h @ W0).std(axis=1)))                  # (n, d)
        spread[i, j] = np.std(a.mean(axis=1) / a.std(axis=1))
        var, nsr = ({name: float(np.mean(forward(a, eps=1e-5)[0].var(axis=0))) for name, (forward, _) in NORMS.items()},
                    {name: noise_to_signal(*fb, a, h, r, t) for name, fb in NORMS.items()})
        ratios["hidden states"][i, j] = var["LayerNorm"] / var["RMSNorm"]
        ratios["predicted"][i, j] = predicted_variance_ratio(a)
        ratios["gradients"][i, j] = nsr["LayerNorm"] / nsr["RMSNorm"]
off = ratios["hidden states"] / ratios["predicted"] - 1                 # (seeds, doses)
check(np.max(np.abs(off)) < 0.02, "at every dose the hidden states' variance ratio is the derivation's")
check(abs(np.log(geometric_interval(ratios["gradients"][:, 0])[0])) < 0.02, "without shift noise the norms coincide")
report(lesson, f"  shift noise 0 to {DOSES[-1]:g} row stds: spread of a's row mean/std {spread[:, 0].mean():.2f} to "
               f"{spread[:, -1].mean():.2f}; hidden states' variance, LayerNorm / RMSNorm, measured against the "
               f"derivation: largest difference {np.max(np.abs(off)):.2%}")
pays = [first_crossing(spread[i], -np.log(ratios["gradients"][i]), -np.log(0.9)) for i in range(len(seeds))]
check(np.all(np.isfinite(pays)), "every seed's curve crosses 0.9 within the doses measured")
at = mean_interval(pays)
curve = np.array([geometric_interval(ratios["gradients"][:, j]) for j in range(len(DOSES))])   # (doses, 3)
lesson.claim("Re-centring does not reduce the variance of gradients (shift noise: the dose at which it starts to "
             "pay)", source=paper("§1"),
             measured=f"noise-to-signal of dL/dW over minibatches of 32, centred readout, a = hW0 on ReLU features "
                      f"plus shift noise; LayerNorm / RMSNorm paired per seed over {len(DOSES)} doses: "
                      f"{curve[1, 0]:.3f} at a spread of {spread[:, 1].mean():.2f}, {curve[-1, 0]:.3f} at "
                      f"{spread[:, -1].mean():.2f}. The spread of a's row mean/std between examples at which it "
                      f"reaches 0.9 (LayerNorm 10% less noisy): {interval(*at, fmt='{:.2f}', n=len(seeds))} "
                      "(holds if at least 2)",
             value=at[0], interval=at[1:], **above(2.0, approx=1.0), expect=VERDICTS)

# %% [markdown]
# ## Eq. 8: the gradients of the gain and the bias
#
# For $v = \mathrm{RMSNorm}(Wx) \odot g + b$,
#
# $$\frac{\partial L}{\partial b} = \frac{\partial L}{\partial v}, \qquad
#   \frac{\partial L}{\partial g} = \frac{\partial L}{\partial v} \odot \hat x .$$
#
# $\hat x$ does not change when $x$ or $W$ is scaled, so neither does $v$, $\partial L/\partial v$, or the two
# gradients: with $\epsilon = 0$ (the paper's definition) they should agree to round-off for any scale. The
# test loss is $L = \sum r \odot \tanh(v)$ with a fixed random $r$, and the scales run from $10^{-3}$ to
# $10^{3}$.

# %%
def eq8_change(rng, n=16, d_in=12, d=10):
    """Largest relative change of dL/db and dL/dg when x or W is scaled by delta (eps = 0)."""
    x, W = rng.standard_normal((n, d_in)), rng.standard_normal((d, d_in))
    g, b, r = rng.uniform(0.5, 2, d), rng.standard_normal(d), rng.standard_normal((n, d))

    def grads(x, W):
        v, cache = sn.rms_norm_forward(x @ W.T, g, b, eps=0.0)
        dv = r * (1 - np.tanh(v) ** 2)                              # L = sum(r * tanh(v))
        out = sn.rms_norm_backward(dv, cache)
        return np.concatenate([out["bias"], out["weight"]])
    ref = grads(x, W)
    return max(max(np.max(np.abs(grads(k * x, W) - ref)), np.max(np.abs(grads(x, k * W) - ref)))
               for k in (1e-3, 0.1, 10, 1e3)) / np.max(np.abs(ref))


change = eq8_change(rng)
check(change < 1e-12, "eq. 8: dL/db and dL/dg do not change when x or W is scaled (an identity at eps = 0)")
report(lesson, f"  eq. 8, v = RMSNorm(Wx)·g + b, eps = 0, L = sum(r·tanh(v)); x or W scaled by 1e-3 … 1e3: "
               f"largest relative change of dL/db, dL/dg {change:.1e}")

# %% [markdown]
# ## LayerNorm is RMSNorm after re-centred weights
#
# LayerNorm subtracts the mean of $a = Wx$; the matrix $P = I - \mathbf{1}\mathbf{1}^\top / n$ subtracts it as
# a matrix: $PWx$ has mean 0, and RMSNorm of a mean-zero vector is LayerNorm. So
#
# $$\mathrm{LN}(Wx) = \mathrm{RMSNorm}(PWx)$$
#
# exactly, with the same $\epsilon$ and the same affine: the two differ only in whether the centring is done
# by the layer, on every input, or folded into the weights, where training would have to keep it. The test:
# 64 rows of 32 summed inputs whose means run from $-3$ to $3$.

# %%
a = rng.standard_normal((64, 32)) * rng.uniform(0.2, 3, (64, 1)) + rng.uniform(-3, 3, (64, 1))
w, b = rng.uniform(0.5, 2, 32), rng.standard_normal(32)
P = np.eye(32) - np.ones((32, 32)) / 32                          # the re-centring matrix
gap = np.max(np.abs(sn.layer_norm_forward(a, w, b, eps=1e-5)[0] - sn.rms_norm_forward(a @ P.T, w, b, eps=1e-5)[0]))
check(gap < 1e-12, "LN(Wx) = RMSNorm((I - 11^T/n)Wx): an identity, to round-off")
report(lesson, f"  LN(Wx) against RMSNorm((I − 11ᵀ/n)Wx), 64 rows of 32 summed inputs with means from −3 to 3, "
               f"the same eps, weight and bias: largest difference {gap:.1e}")

# %% [markdown]
# ## What bounds $\lVert W\rVert$ (§4.2)
#
# The paper argues that the implicit learning rate, a step that shrinks as $1/\lVert W\rVert$, keeps weights
# from growing large. The lesson runs lesson 05's layer (Linear $\to$ RMSNorm, SGD, $\eta = 2$) for longer,
# without and with weight decay $\lambda$,
#
# $$W \leftarrow W - \eta\,\Big(\frac{\partial L}{\partial W} + \lambda W\Big),$$
#
# and reads how much $\lVert W\rVert$ grows, and how much it still changes over the last quarter of the steps.

# %%
def train_norm(X, T, lr, decay, steps, seed=7):
    """SGD on Linear(no bias) -> RMSNorm, optionally with weight decay; ||W|| per step."""
    rng = np.random.default_rng(seed)
    W = np.random.default_rng(1).standard_normal((T.shape[1], X.shape[1])) / np.sqrt(X.shape[1])
    norms = []
    for _ in range(steps):
        idx = rng.integers(0, len(X), 64)
        a, lin = sn.linear_forward(X[idx], W)
        v, cache = sn.rms_norm_forward(a, eps=0.0)
        dW = sn.linear_backward(sn.rms_norm_backward((v - T[idx]) / v.size, cache)["x"], lin)["weight"]
        W = W - lr * (dW + decay * W)
        norms.append(np.linalg.norm(W))
    return np.array(norms)


X = rng.standard_normal((2048, 16))
T = sn.rms_norm_forward(X @ rng.standard_normal((8, 16)).T)[0] + 0.5 * rng.standard_normal((2048, 8))
steps, lr, decay = lesson.pick(400, 3000), 2.0, 1e-3
plain, decayed = train_norm(X, T, lr, 0.0, steps), train_norm(X, T, lr, decay, steps)
growth = plain[-1] / plain[0]
q = steps // 4
settle = abs(decayed[-1] / decayed[-q] - 1)
lesson.claim("The implicit learning-rate adaptation keeps the weights from growing large", source=paper("§4.2"),
             measured=f"Linear → RMSNorm, SGD lr {lr:g}, {steps} steps, no weight decay: ‖W‖ grows "
                      f"{growth:.2f}× (the value; holds if at most 1.05×), still growing at the end "
                      f"({plain[-1] / plain[-q] - 1:+.1%} over the last quarter)",
             value=growth, **below(1.05, approx=1.5), expect=lesson.pick(VERDICTS, FAILS))
lesson.claim("With weight decay ‖W‖ settles", source=COMMON,
             measured=f"the same run with weight decay λ = {decay:g}: ‖W‖ {decayed[0]:.2f} → {decayed[-1]:.2f}, "
                      f"changing {settle:.2%} over the last quarter (the value); without: {plain[-1]:.2f}",
             value=settle, **below(0.02, approx=0.05), expect=lesson.pick(VERDICTS, HOLDS))

# %% [markdown]
# The figure: on the left $\lVert W\rVert$ against the step, with and without weight decay; on the right the
# ratios LayerNorm over RMSNorm against the dose: the hidden states' measured ratio (crosses) on the
# derivation's (line), and the gradients' curve, one dot per seed, its geometric mean and 95% interval, the
# bound 0.9 (dotted; below it re-centring reduces the noise) and the dose where the curve crosses it.

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
t = np.arange(1, steps + 1)
ax1.plot(t, plain, color=color("RMSNorm"), label="no weight decay")
ax1.plot(t, decayed, color=color("RMSNorm"), ls="--", label=f"weight decay λ = {decay:g}")
ax1.set(xlabel="SGD step", ylabel="‖W‖", title=f"Linear → RMSNorm, SGD lr {lr:g}: what bounds ‖W‖")
ax1.legend()
dose = spread.mean(axis=0)                                              # (doses,): averaged over the seeds
ax2.plot(dose, np.exp(np.log(ratios["predicted"]).mean(axis=0)), "-", color="0.4", label="hidden states: derivation")
ax2.plot(dose, np.exp(np.log(ratios["hidden states"]).mean(axis=0)), "x", color="k", label="hidden states: measured")
ax2.plot(dose, ratios["gradients"].T, ".", color="0.6", ms=3)
ax2.plot(dose, curve[:, 0], "o-", color=color("LayerNorm"), label="gradients (dots: seeds)")
ax2.fill_between(dose, curve[:, 1], curve[:, 2], color=color("LayerNorm"), alpha=0.25)
ax2.axhline(1, color="k", lw=0.8)
ax2.axhline(0.9, color="0.5", lw=0.8, ls=":", label="the bound, 0.9")
ax2.axvspan(at[1], at[2], color="C3", alpha=0.2, label=f"crossing: {at[0]:.2f} [{at[1]:.2f}, {at[2]:.2f}]")
ax2.set_yscale("log")
ax2.legend(fontsize=8)
ax2.set(xlabel="spread of a's row mean/std between examples (the dose of shift noise)",
        ylabel="LayerNorm / RMSNorm, same seed (log)", title="Does re-centring reduce variance? Over the dose")
lesson.save(fig, "norm")

# %% [markdown]
# ## Questions
#
# **1.** Eq. 8's gradients agree to round-off here. Why does that need $\epsilon = 0$, and what would a
# positive $\epsilon$ change at the smallest scale tried?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"With eps = 0, x_hat = a / RMS(a) is exactly unchanged when a = Wx is scaled, so the gradients "
              f"differ only by round-off (largest relative change {change:.1e}). With eps > 0, x_hat = a / "
              "sqrt(ms + eps): scaling by 1e-3 divides the mean square by 1e6, eps then weighs more, x_hat "
              "shrinks and the gradients change.")

# %% [markdown]
# **2.** Under shift noise the row mean is 0 on average. Before reading the figure: which way must the hidden
# states' ratio LayerNorm / RMSNorm go as the dose grows, by the derivation, and which way would a steady mean
# push it?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
hidden = {what: float(np.exp(np.mean(np.log(ratios[what][:, -1])))) for what in ("hidden states", "predicted")}
lesson.answer(f"Below 1, further as the dose grows. With q symmetric about 0, B = 0 and the ratio is "
              f"(1 - M)/(1 - M A^2) with A = E[1/sqrt(1 + q^2)] < 1: a mean that changes from example to example is "
              f"variation RMSNorm passes on and LayerNorm removes exactly. At the largest dose: measured "
              f"{hidden['hidden states']:.3f}, predicted {hidden['predicted']:.3f} (geometric means over the seeds). "
              "A steady mean goes the other way: RMSNorm's outputs share it, and the ratio is 1 + m^2/s^2 > 1. "
              f"The gradients' noise, through the centred readout, falls below 0.9 once the row mean/std varies by "
              f"{at[0]:.2f} between examples.")

# %% [markdown]
# **3.** Without weight decay, why does every SGD step make $W$ longer, and what stops it?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"RMSNorm's output does not change when W is scaled, so dL/dW is orthogonal to W and a step adds "
              f"length: ||W - lr g||^2 = ||W||^2 + lr^2 ||g||^2. Here ||W|| grew {growth:.2f}x in {steps} steps, "
              f"still {plain[-1] / plain[-q] - 1:+.1%} over the last quarter; with decay lambda = {decay:g} the shrink "
              f"by (1 - lr lambda) each step balances it and ||W|| changes {settle:.2%} over the last quarter.")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    "Whether re-centring reduces the hidden states' variance is decided by the row mean's distribution, not by "
    "training: RMSNorm(a) = (x_hat + q)/sqrt(1 + q^2), so a steady mean shrinks RMSNorm's variance by 1 + m^2/s^2 "
    f"and a mean that varies adds to it; the run matches that to within {np.max(np.abs(off)):.1%} at every dose.",
    "For the gradients, where no formula decides it, the answer is a curve: under shift noise re-centring starts "
    f"to pay (LayerNorm 10% less noisy) once the row mean/std varies by {interval(*at, fmt='{:.2f}')} between "
    "examples, so 'dispensable': " + lesson.result("starts to pay") + ".",
    "Normalization alone does not bound ||W||: SGD steps orthogonal to W lengthen it ("
    + lesson.result("keeps the weights from growing") + "); weight decay does (" + lesson.result("With weight decay")
    + ").")

# %%
lesson.finish()
