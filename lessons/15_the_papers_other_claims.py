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
from lessons._stats import geometric_interval
from lessons._style import color
from lessons._training import interval, report

lesson = start(__name__, "15_the_papers_other_claims")

# %% [markdown]
# ## The hypothesis (§1)
#
# LayerNorm's re-centring is dispensable: it does not reduce the variance of hidden states or of gradients,
# and re-scaling alone gives the benefit. §1 puts it beside the usual reason for re-centring: LayerNorm's
# output does not change when the inputs or the weights are shifted by noise. The lesson measures both
# variances on lesson 04's layer, normalized by LayerNorm or by RMSNorm, on the same data and weights for both:
# ReLU features $h$ ($n$ examples of $d_{in} = 48$), $a = hW$ ($d = 64$), $y = \mathrm{Norm}(a)$ without affine,
# and $L = \frac{1}{B}\sum_b \tfrac{1}{2}(y_b \cdot r - t_b)^2$ with a fixed readout $r$, centred
# ($\sum_i r_i = 0$; lesson 04 says why), and a teacher's targets $t$. The two measures: the variance across
# examples of each unit of $y$, averaged over the units, and the noise of $\partial L/\partial W$ across
# minibatches of $B = 32$ (lesson 04's measure, $\overline{\lVert G_b - G\rVert^2}/\lVert G\rVert^2$ with
# $G_b$ a minibatch's gradient and $G$ their mean).
#
# Re-centring can only matter where the vector normalized, $a$, has a row mean; with zero-mean random weights
# it has almost none, even on positive ReLU features (lesson 04), and the two norms then coincide. So the
# lesson gives $a$ a row mean in two ways, and prints its row mean/std with each result:
#
# * **a steady mean**: every weight raised by one std of the weights (the paper's shift of the weight matrix),
#   $W = W_0 + 1/\sqrt{d_{in}}$, which adds $\sum_i h_i/\sqrt{d_{in}}$ to every unit of a row: a mean several
#   times the row's spread, that moves only a little from example to example;
# * **shift noise**: zero-mean weights $W_0$, and a random amount added to every unit of each example's $a$ (a
#   normal draw $z_n$ per example, times twice $a$'s row std under $W_0$): a row mean that is 0 on average and
#   changes from example to example.
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
# alone, so the lesson does not grade it. The cell computes the prediction from each seed's $a$ and checks
# it against the measured ratio.
#
# The gradients' noise has no such closed form: it goes through the readout, the targets and the minibatch
# sums, and it is graded. "Does not reduce" is graded as: LayerNorm's noise-to-signal at least 0.9 times
# RMSNorm's for the whole 95% interval over the seeds (approximately: 0.8); an interval wholly below 0.8
# means re-centring does reduce it.

# %%
NORMS = {"LayerNorm": (sn.layer_norm_forward, sn.layer_norm_backward),
         "RMSNorm": (sn.rms_norm_forward, sn.rms_norm_backward)}


def layer(seed, n, d_in=48, d=64):
    """Lesson 04's data and zero-mean weights, and a shift-noise draw per example: h (n, d_in), W0 (d_in, d),
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
# The measurement: for each case and each seed (a seed draws the data, $W_0$, $r$, the teacher and $z$), the
# vector normalized $a$, its row mean/std, and both measures for both norms on that same $a$; the ratio
# LayerNorm/RMSNorm is taken per seed. The hidden states' ratio is checked against the derivation's
# prediction from the same $a$; the gradients' ratio is graded by its geometric mean over the seeds.

# %%
def predicted_variance_ratio(a):
    """Var_LN / Var_RMS from the derivation: (1 - M) / (1 - M A^2 - B^2), q = row mean / row std of a (n, d)."""
    q = a.mean(axis=1) / a.std(axis=1)                                 # (n,)
    M = np.mean(((a - a.mean(axis=1, keepdims=True)) / a.std(axis=1, keepdims=True)).mean(axis=0) ** 2)
    A, B = np.mean(1 / np.sqrt(1 + q ** 2)), np.mean(q / np.sqrt(1 + q ** 2))
    return (1 - M) / (1 - M * A ** 2 - B ** 2)


rng = np.random.default_rng(15)
seeds, n = range(lesson.pick(3, 24)), lesson.pick(1024, 4096)
CASES = {"a steady row mean": (1.0, 0.0), "shift noise": (0.0, 2.0)}   # (common weight c in stds, noise)
ratios = {(what, case): [] for what in ("hidden states", "predicted", "gradients") for case in CASES}
a_ratio = {case: [] for case in CASES}                                 # a's row mean/std and its spread, per seed
for case, (c, noise) in CASES.items():
    for seed in seeds:
        h, W0, r, t, z = layer(seed, n)
        a = h @ (W0 + c / np.sqrt(W0.shape[0])) + z * noise * float(np.mean((h @ W0).std(axis=1)))   # (n, d)
        mean_over_std = a.mean(axis=1) / a.std(axis=1)                 # per example
        a_ratio[case].append((np.mean(mean_over_std), np.std(mean_over_std)))
        var, nsr = ({name: float(np.mean(forward(a, eps=1e-5)[0].var(axis=0))) for name, (forward, _) in NORMS.items()},
                    {name: noise_to_signal(*fb, a, h, r, t) for name, fb in NORMS.items()})
        ratios["hidden states", case].append(var["LayerNorm"] / var["RMSNorm"])
        ratios["predicted", case].append(predicted_variance_ratio(a))
        ratios["gradients", case].append(nsr["LayerNorm"] / nsr["RMSNorm"])
ratios = {key: np.array(v) for key, v in ratios.items()}
for case in CASES:
    a_mean, a_spread = (np.mean(v) for v in zip(*a_ratio[case]))          # averaged over the seeds
    check(max(abs(a_mean), a_spread) > 1,
          f"{case}: a's row mean is several times its row std, or varies that much between examples")
    off = ratios["hidden states", case] / ratios["predicted", case] - 1     # per seed
    check(np.max(np.abs(off)) < 0.02, f"{case}: the hidden states' variance ratio is the derivation's")
    report(lesson, f"  {case}: row mean/std of a {a_mean:.2f} (std {a_spread:.2f} between examples); hidden "
                   f"states' variance, LayerNorm / RMSNorm: measured {np.min(ratios['hidden states', case]):.3f}"
                   f"-{np.max(ratios['hidden states', case]):.3f} over the seeds, the derivation "
                   f"{np.min(ratios['predicted', case]):.3f}-{np.max(ratios['predicted', case]):.3f} (largest "
                   f"difference {np.max(np.abs(off)):.2%}); 1 + mean(m/s)^2 = {1 + a_mean ** 2:.2f}")
    mean, lo, hi = geometric_interval(ratios["gradients", case])
    lesson.claim(f"Re-centring does not reduce the variance of gradients ({case})", source=paper("§1"),
                 measured=f"noise-to-signal of dL/dW over minibatches of 32, centred readout; a = hW on ReLU "
                          f"features, {case}: the row mean/std of a is {a_mean:.2f} on average, with a std of "
                          f"{a_spread:.2f} between examples; LayerNorm / RMSNorm = "
                          f"{interval(mean, lo, hi, n=len(seeds))} (geometric mean, paired per seed)",
                 value=mean, interval=(lo, hi), **above(0.9, approx=0.8), expect=VERDICTS)

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
# from growing large. Lesson 05 shows the opposite mechanism: $\partial L/\partial W$ is orthogonal to $W$,
# so every SGD step lengthens $W$, and $\lVert W\rVert$ grows without a bound, only more slowly as it grows.
# What bounds it is weight decay:
#
# $$W \leftarrow W - \eta\,\Big(\frac{\partial L}{\partial W} + \lambda W\Big)$$
#
# shrinks $W$ by a factor $(1 - \eta\lambda)$ each step while the gradient lengthens it, and the two balance
# at a finite norm. The lesson runs lesson 05's layer (Linear $\to$ RMSNorm, SGD, $\eta = 2$) for longer, with
# and without decay, and reads how much $\lVert W\rVert$ still changes over the last quarter of the steps.

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
lesson.claim("With weight decay ‖W‖ settles where the decay balances the gradient's lengthening", source=COMMON,
             measured=f"the same run with weight decay λ = {decay:g}: ‖W‖ {decayed[0]:.2f} → {decayed[-1]:.2f}, "
                      f"changing {settle:.2%} over the last quarter (the value); without: {plain[-1]:.2f}",
             value=settle, **below(0.02, approx=0.05), expect=lesson.pick(VERDICTS, HOLDS))

# %% [markdown]
# The figure: on the left $\lVert W\rVert$ against the step, with and without weight decay; on the right the
# ratios LayerNorm over RMSNorm, one dot per seed: for the hidden states the derivation's prediction beside
# the measured ratio (crosses), for the gradients the geometric mean and its 95% interval (black), graded
# against the dotted line (0.9): below it re-centring reduces the noise.

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
t = np.arange(1, steps + 1)
ax1.plot(t, plain, color=color("RMSNorm"), label="no weight decay")
ax1.plot(t, decayed, color=color("RMSNorm"), ls="--", label=f"weight decay λ = {decay:g}")
ax1.set(xlabel="SGD step", ylabel="‖W‖", title=f"Linear → RMSNorm, SGD lr {lr:g}: what bounds ‖W‖")
ax1.legend()
shown = [(what, case) for what in ("hidden states", "gradients") for case in CASES]
for i, key in enumerate(shown):
    r = ratios[key]
    ax2.plot(np.full(len(r), i) + rng.uniform(-0.12, 0.12, len(r)), r, ".", color="0.6", ms=4)
    if key[0] == "gradients":
        mean, lo, hi = geometric_interval(r)
        ax2.errorbar(i, mean, yerr=[[mean - lo], [hi - mean]], fmt="o", color="k", capsize=5)
    else:
        p = ratios["predicted", key[1]]
        ax2.plot(np.full(len(p), i + 0.25), p, "x", color="k", ms=5, label="derivation" if i == 0 else None)
ax2.axhline(1, color="k", lw=0.8)
ax2.axhline(0.9, color="0.5", lw=0.8, ls=":")
ax2.set_xticks(range(len(shown)), [f"{what}\n{case}" for what, case in shown], fontsize=9)
ax2.set_yscale("log")
ax2.legend(fontsize=8)
ax2.set(ylabel="LayerNorm / RMSNorm, same seed (log)",
        title="Does re-centring reduce variance? (dots: seeds; crosses: derivation)")
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
# **2.** Under shift noise the row mean is 0 on average. Before reading the printed ratios: which way must the
# hidden states' ratio LayerNorm / RMSNorm go, by the derivation, and what did the gradients' ratio do?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
ratio_of = {key: float(np.exp(np.mean(np.log(r)))) for key, r in ratios.items()}
lesson.answer(f"Below 1. With q symmetric about 0, B = 0 and the ratio is (1 - M)/(1 - M A^2) with A = "
              f"E[1/sqrt(1 + q^2)] < 1: a mean that changes from example to example is variation RMSNorm passes "
              f"on and LayerNorm removes exactly. Measured {ratio_of['hidden states', 'shift noise']:.3f}, predicted "
              f"{ratio_of['predicted', 'shift noise']:.3f} (geometric means). A steady mean goes the other way: "
              f"RMSNorm's outputs share it, {ratio_of['hidden states', 'a steady row mean']:.2f} against "
              f"{ratio_of['predicted', 'a steady row mean']:.2f}. The gradients' noise, through the centred readout: "
              f"{ratio_of['gradients', 'a steady row mean']:.2f} with a steady mean and "
              f"{ratio_of['gradients', 'shift noise']:.2f} under shift noise (below 1: re-centring reduced it). "
              "Shift noise is the case §1 names as the usual reason for re-centring.")

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
    "and a mean that varies adds to it; the run matches that to within 2%.",
    "For the gradients, where no formula decides it, re-centring " + (
        "reduced the noise in both cases" if all(geometric_interval(ratios["gradients", c])[2] < 0.9 for c in CASES)
        else "did not reduce the noise in every case") + ": " + lesson.result("gradients (a steady row mean)")
    + " with a steady mean, " + lesson.result("gradients (shift noise)") + " under shift noise.",
    "Normalization alone does not bound ||W||: SGD steps orthogonal to W lengthen it ("
    + lesson.result("keeps the weights from growing") + "); weight decay does (" + lesson.result("With weight decay")
    + ").")

# %%
lesson.finish()
