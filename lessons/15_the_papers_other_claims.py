# %% [markdown]
# # The paper's other claims: its hypothesis, eq. 8, LayerNorm as a re-centred RMSNorm, and what bounds ||W||.
#
# Four statements of the paper besides its headline, each measured: the hypothesis that re-centring is
# dispensable (§1), the scale invariance of the gradients of the gain and bias (eq. 8), LayerNorm written as
# RMSNorm of re-centred weights (§4), and what keeps $\lVert W\rVert$ from growing (§4.2).

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numpy as np

import scratchnorm as sn
from lessons._common import COMMON, FAILS, HOLDS, VERDICTS, paper, start
from lessons._gradnoise import gradient_noise, hidden_variance
from lessons._grading import above, below
from lessons._stats import mean_interval
from lessons._training import interval

lesson = start(__name__, "15_the_papers_other_claims")

# %% [markdown]
# ## The hypothesis (§1)
#
# LayerNorm's re-centring is dispensable: it does not reduce the variance of hidden states or of gradients,
# and re-scaling alone gives the benefit. The lesson measures both on one layer $a = hW$ normalized by
# LayerNorm or by RMSNorm, with hidden states $h$ that have a nonzero mean (ReLU features;
# `lessons/_gradnoise.py`), on the same data and weights for both: the variance across examples of each unit
# of the normalized output, and the noise of $\partial L/\partial W$ across minibatches (lesson 04's measure).
# "Does not reduce" is graded as: LayerNorm's variance is at least 0.9 times RMSNorm's, for the whole 95%
# interval over the seeds.

# %%
rng = np.random.default_rng(15)
seeds = range(lesson.pick(3, 12))
hid = [hidden_variance(s, n=lesson.pick(1024, 4096)) for s in seeds]
noise = [gradient_noise(s, n=lesson.pick(1024, 4096)) for s in seeds]
for what, data, unit in (("hidden states (variance across examples of each unit of Norm(h W))", hid, "variance"),
                         ("gradients (noise-to-signal of dL/dW over minibatches of 32)", noise, "noise")):
    ratio = np.exp(mean_interval([np.log(np.ravel(r["LayerNorm"])[0] / np.ravel(r["RMSNorm"])[0]) for r in data]))
    lesson.claim(f"Re-centring does not reduce the variance of {what.split(' (')[0]}", source=paper("§1"),
                 measured=f"{what}, ReLU features with a nonzero mean: LayerNorm / RMSNorm = "
                          f"{interval(*ratio, n=len(data))} (geometric mean, paired per seed); value: the "
                          f"interval's lower end (holds: LayerNorm's {unit} at least 0.9 times RMSNorm's)",
                 value=ratio[1], **above(0.9, approx=0.8), expect=VERDICTS)

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
lesson.claim("dL/db and dL/dg do not change when x or W is scaled (eq. 8)", source=paper("§4.2, eq. 8"),
             measured=f"v = RMSNorm(Wx)·g + b, eps = 0, L = sum(r·tanh(v)); x or W scaled by 1e-3 … 1e3: largest "
                      f"relative change {change:.1e}",
             value=change, **below(1e-12, approx=1e-6), expect=HOLDS)

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
lesson.claim("LayerNorm is RMSNorm after re-centred weights: LN(Wx) = RMSNorm((I − 11ᵀ/n)Wx)", source=paper("§4"),
             measured=f"64 rows of 32 summed inputs with means from −3 to 3, the same eps, weight and bias: "
                      f"largest difference {gap:.1e}",
             value=gap, **below(1e-12, approx=1e-6), expect=HOLDS)

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
# variance ratios of the hypothesis, LayerNorm over RMSNorm, one dot per seed.

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
t = np.arange(1, steps + 1)
ax1.plot(t, plain, label="no weight decay")
ax1.plot(t, decayed, label=f"weight decay λ = {decay:g}")
ax1.set(xlabel="SGD step", ylabel="‖W‖", title=f"Linear → RMSNorm, SGD lr {lr:g}: what bounds ‖W‖")
ax1.legend()
for i, (data, label) in enumerate(((hid, "hidden-state variance"), (noise, "gradient noise"))):
    r = [np.ravel(d["LayerNorm"])[0] / np.ravel(d["RMSNorm"])[0] for d in data]
    ax2.plot(np.full(len(r), i) + rng.uniform(-0.08, 0.08, len(r)), r, "o", alpha=0.7, label=label)
ax2.axhline(1, color="k", lw=0.8)
ax2.axhline(0.9, color="0.5", lw=0.8, ls=":")
ax2.set_xticks([0, 1], ["hidden-state variance", "gradient noise"])
ax2.set_xlim(-0.6, 1.6)
ax2.set(ylabel="LayerNorm / RMSNorm, same seed", title="Does re-centring reduce variance? (one dot per seed)")
lesson.save(fig, "norm")

# %% [markdown]
# ## Questions
#
# **1.** Eq. 8's gradients agree to round-off here. Why does that need $\epsilon = 0$, and what would a
# positive $\epsilon$ change at the smallest scale tried?

# %% tags=["remove-input"]
lesson.answer(f"With eps = 0, x_hat = a / RMS(a) is exactly unchanged when a = Wx is scaled, so the gradients "
              f"differ only by round-off (largest relative change {change:.1e}). With eps > 0, x_hat = a / "
              "sqrt(ms + eps): scaling by 1e-3 divides the mean square by 1e6, eps then weighs more, x_hat "
              "shrinks and the gradients change.")

# %% [markdown]
# **2.** Without weight decay, why does every SGD step make $W$ longer, and what stops it?

# %% tags=["remove-input"]
lesson.answer(f"RMSNorm's output does not change when W is scaled, so dL/dW is orthogonal to W and a step adds "
              f"length: ||W - lr g||^2 = ||W||^2 + lr^2 ||g||^2. Here ||W|| grew {growth:.2f}x in {steps} steps, "
              f"still {plain[-1] / plain[-q] - 1:+.1%} over the last quarter; with decay lambda = {decay:g} the shrink "
              f"by (1 - lr lambda) each step balances it and ||W|| changes {settle:.2%} over the last quarter.")

# %% [markdown]
# **3.** LayerNorm equals RMSNorm of re-centred weights to round-off. Why is RMSNorm after a plain linear
# layer still not the same model as LayerNorm?

# %% tags=["remove-input"]
lesson.answer(f"The identity (largest difference {gap:.1e}) needs the weights P W, whose summed inputs have mean 0 "
              "for every input; LayerNorm re-centres on every input by itself, while a plain W trained under "
              "RMSNorm has no reason to stay re-centred: training would have to keep it so.")

# %%
lesson.finish()
