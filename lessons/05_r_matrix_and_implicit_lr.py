# %% [markdown]
# # The R matrix and the implicit learning rate: why large weights get small updates.
#
# The paper's gradient analysis takes $a = Wx$ and $v = \frac{a}{\mathrm{RMS}(a)} \odot g + b$. The gradient
# with respect to $W$ is, summed over the cases,
#
# $$
# \frac{\partial L}{\partial W} = \sum_{\text{cases}}
# \Bigl(R \bigl(g \odot \tfrac{\partial L}{\partial v}\bigr)\Bigr)\, x^\top,
# \qquad R = \frac{1}{\mathrm{RMS}(a)} \Bigl(I - \frac{a a^\top}{d\, \mathrm{RMS}(a)^2}\Bigr).
# $$
#
# $R$ is RMSNorm's Jacobian (lesson 04). Scale $a$ by $\delta$ (through $x$ or $W$) and $\mathrm{RMS}(a)$
# scales by $\delta$ too, so $R(\delta a) = R(a)/\delta$, while $v$, and with it $\partial L/\partial v$, does
# not change. Hence:
#
# * scale the input, $x \to \delta x$: $R/\delta$ times $\delta x$, and $\partial L/\partial W$ is unchanged;
# * scale the weights, $W \to \delta W$: $\partial L/\partial W \to (\partial L/\partial W)/\delta$, a slope of
#   $-1$ on log-log axes. LayerNorm behaves the same; a layer without normalization does not (its output,
#   and the loss's gradient, grow with $W$).

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numpy as np

import scratchnorm as sn
from lessons._common import HOLDS, VERDICTS, check, paper, start
from lessons._grading import above, below
from lessons._stats import geometric_interval
from lessons._style import color
from lessons._training import interval, one_blas_thread

lesson = start(__name__, "05_r_matrix_and_implicit_lr")

# %% [markdown]
# `weight_grad` computes $\partial L/\partial W$ through the library's backward passes for a squared loss,
# after RMSNorm, LayerNorm or no normalization.

# %%
NORMS = {"RMSNorm": (sn.rms_norm_forward, sn.rms_norm_backward),
         "LayerNorm": (sn.layer_norm_forward, sn.layer_norm_backward)}


def weight_grad(x, W, g, target, norm, eps=0.0):
    """dL/dW for L = mean((norm(x W^T) * g - target)^2) / 2 (norm None: no normalization)."""
    a, lin_cache = sn.linear_forward(x, W)
    if norm is None:
        v = a * g
    else:
        forward, backward = NORMS[norm]
        v, cache = forward(a, g, eps=eps)
    dv = (v - target) / v.size
    da = dv * g if norm is None else backward(dv, cache)["x"]
    return sn.linear_backward(da, lin_cache)["weight"]


# %% [markdown]
# ## $R$ and the paper's formula for $\partial L/\partial W$
#
# First the scaling of $R$ itself: $R(\delta a) = R(a)/\delta$, for one case.

# %%
rng = np.random.default_rng(5)
n, n_in, d = lesson.pick(64, 256), 24, 24
x, W = rng.standard_normal((n, n_in)), rng.standard_normal((d, n_in)) / np.sqrt(n_in)
g, target, dv = rng.uniform(0.5, 1.5, d), rng.standard_normal((n, d)), rng.standard_normal((n, d))
a = W @ x[0]
deltas = np.logspace(-3, 3, 13)
r_err = max(np.max(np.abs(sn.rms_norm_jacobian(s * a) * s - sn.rms_norm_jacobian(a))) for s in deltas)
r_err /= np.max(np.abs(sn.rms_norm_jacobian(a)))
lesson.claim("R(δa) = R(a)/δ", source=paper("§4.2, eq. 10"),
             measured=f"max relative deviation {r_err:.1e} for δ in 1e-3..1e3",
             value=r_err, **below(1e-12, approx=1e-6), expect=HOLDS)

# %% [markdown]
# Then eq. 9, the sum of outer products through $R$ (`linear_rms_norm_dW_via_R`), against the library's fast
# path: Linear, then RMSNorm, then their backward passes.

# %%
a_all, lin_cache = sn.linear_forward(x, W)
_, cache = sn.rms_norm_forward(a_all, g, eps=0.0)
fast = sn.linear_backward(sn.rms_norm_backward(dv, cache)["x"], lin_cache)["weight"]
via_r = sn.linear_rms_norm_dW_via_R(x, W, g, dv)
formula_err = np.max(np.abs(fast - via_r)) / np.max(np.abs(fast))
lesson.claim("dL/dW = Σ xᵀ ⊗ (diag(g ⊙ dL/dv) × R)", source=paper("§4.2, eq. 9"),
             measured=f"formula vs backward pass: max relative difference {formula_err:.1e}",
             value=formula_err, **below(1e-12, approx=1e-6), expect=HOLDS)

# %% [markdown]
# And the invariance to scaling the input, $x \to \delta x$: exact with $\epsilon = 0$, and measured also with
# $\epsilon = 10^{-6}$.

# %%
base = weight_grad(x, W, g, target, "RMSNorm")
x_err = max(np.max(np.abs(weight_grad(s * x, W, g, target, "RMSNorm") - base)) for s in deltas)
x_err_eps = max(np.max(np.abs(weight_grad(s * x, W, g, target, "RMSNorm", 1e-6) - base))
                for s in np.logspace(-1, 1, 5))
x_err, x_err_eps = x_err / np.max(np.abs(base)), x_err_eps / np.max(np.abs(base))
lesson.claim("dL/dW is invariant to scaling the input x", source=paper("§4.2"),
             measured=f"max relative change {x_err:.1e} for δ in 1e-3..1e3 (eps = 0); "
                      f"{x_err_eps:.1e} for δ in 0.1..10 with eps = 1e-6",
             value=x_err, **below(1e-12, approx=1e-6), expect=HOLDS)

# %% [markdown]
# ## The gradient against the weight scale
#
# $\lVert \partial L/\partial W \rVert$ against $\delta$ with $W \to \delta W$, with fitted slopes: $-1$ for
# both normalizations, positive without one.

# %%
# ||dL/dW|| against the weight scale.
deltas = np.logspace(-2, 2, lesson.pick(9, 17))
fig, ax = plt.subplots(figsize=(6.8, 4.5))
slopes = {}
for norm, style in [("RMSNorm", dict(marker="o", ms=8, mfc="none", lw=2.5, alpha=0.6)),
                    ("LayerNorm", dict(marker="s", ms=3, ls="--")), (None, dict(marker="^", ms=4))]:
    sizes = np.array([np.linalg.norm(weight_grad(x, s * W, g, target, norm)) for s in deltas])
    name = norm or "no normalization"
    style["color"] = color(norm or "none")
    big = deltas >= 1
    slopes[name] = np.polyfit(np.log(deltas[big]), np.log(sizes[big]), 1)[0]
    ax.loglog(deltas, sizes, **style, label=f"{name}: slope {slopes[name]:+.3f} (δ ≥ 1)")
ax.set(xlabel="weight scale δ  (W → δW)", ylabel="‖dL/dW‖ (Frobenius)",
       title="Normalized layers: the gradient falls as 1/δ\n(RMSNorm and LayerNorm nearly coincide here)")
ax.legend()
lesson.save(fig, "scaling")
worst = max(abs(slopes["RMSNorm"] + 1), abs(slopes["LayerNorm"] + 1))
check(slopes["no normalization"] > 0.5, "without normalization the gradient grows with the weights")
lesson.claim("dL/dW is inversely proportional to the weight scale (slope −1 on log-log axes)",
             source=paper("§4.2"), measured=f"fitted slopes: RMSNorm {slopes['RMSNorm']:.4f}, LayerNorm "
             f"{slopes['LayerNorm']:.4f}, no normalization {slopes['no normalization']:+.2f}",
             value=worst, **below(1e-9, approx=1e-2), expect=HOLDS)

# %% [markdown]
# ## In training: a learning-rate schedule nobody wrote
#
# $\partial L/\partial W$ is orthogonal to $W$: $\langle \partial L/\partial W, W\rangle = \sum_{\text{cases}}
# \partial L/\partial a \cdot a = 0$, because $R a = 0$. So each SGD step $W \to W - \eta\, \partial L/\partial W$
# lengthens $W$:
#
# $$\lVert W_{\text{new}} \rVert^2 = \lVert W \rVert^2 + \eta^2 \lVert \partial L/\partial W \rVert^2 .$$
#
# The relative step $\eta \lVert \partial L/\partial W \rVert / \lVert W \rVert$ is the one that matters (the
# output depends only on the direction of $W$), and it is the product of two factors,
#
# $$\frac{\eta\,\lVert \partial L/\partial W \rVert}{\lVert W \rVert} = \frac{\eta}{\lVert W \rVert^2} \cdot
#   \lVert W \rVert\,\lVert \partial L/\partial W \rVert ,$$
#
# the implicit learning rate $\eta/\lVert W\rVert^2$, and the gradient the same direction would get at
# $\lVert W\rVert = 1$, which falls as the model learns. A start with $4\times$ larger weights has a $16\times$
# smaller implicit learning rate, exactly (a check below, not a claim). What that does to learning is the real
# question: a short SGD run of Linear $\to$ RMSNorm on a noisy regression task, started at two weight scales on
# the same minibatches, over several seeds. `train` records, per step, $\lVert W \rVert$, the relative step, the
# loss on 512 fixed training examples and $\cos(\partial L/\partial W, W)$.
#
# The claim is graded on the loss: the number of steps each run takes to come 90% of the way from the starting
# loss down to the floor both reach (the mean of the last 50 steps, the lower of the two), as a ratio, scale 4
# over scale 1, paired per seed (geometric mean, 95% interval). If the weight norm did not set the step, the
# two runs would learn at the same pace (ratio 1); a $16\times$ smaller implicit learning rate predicts a ratio
# near 16 when the steps are small, less when the scale-1 run's own $\lVert W\rVert$ grows on the way. It holds
# if the whole interval is at least $4$ (the scale factor $\delta$; on the $\delta^2$ scale, a quarter of the
# prediction), approximately if at least $1.5$. The measured text also counts the steps on the implicit
# learning rate's own clock, $\sum_t \eta/\lVert W_t\rVert^2$ up to the target: if the weight norm alone sets
# the pace, both runs get there at the same count.

# %%
def train(X, T, scale, lr, steps, seed):
    """SGD on Linear(bias=False) -> RMSNorm; per step ||W||, relative step, loss on X[:512], cos(dW, W)."""
    rng = np.random.default_rng(seed)
    linear = sn.Linear(X.shape[1], T.shape[1], bias=False, seed=seed)
    norm = sn.RMSNorm(T.shape[1], elementwise_affine=False)
    linear.params["weight"] = linear.params["weight"] * scale
    history = []
    for _ in range(steps):
        idx = rng.integers(0, len(X), 64)
        v = norm.forward(linear.forward(X[idx]))
        linear.backward(norm.backward((v - T[idx]) / v.size))
        W, dW = linear.params["weight"], linear.grads["weight"]
        w_norm, g_norm = np.linalg.norm(W), np.linalg.norm(dW)
        loss = 0.5 * np.mean((norm.forward(linear.forward(X[:512])) - T[:512]) ** 2)   # 512 fixed examples
        history.append((w_norm, lr * g_norm / w_norm, loss, np.sum(W * dW) / (w_norm * g_norm)))
        linear.params["weight"] = W - lr * dW
    return np.array(history)


def steps_to_target(h1, h4, lr):
    """Steps each run takes to come 90% of the way down to the common floor, and sum lr/||W||^2 up to there."""
    floor = min(h1[-50:, 2].mean(), h4[-50:, 2].mean())
    target = floor + 0.1 * (h1[0, 2] - floor)
    check(h1[:, 2].min() <= target and h4[:, 2].min() <= target, "both runs reach the target")
    k = [int(np.argmax(h[:, 2] <= target)) + 1 for h in (h1, h4)]
    clock = [float(np.sum(lr / h[:kk, 0] ** 2)) for h, kk in zip((h1, h4), k)]
    return k, clock, target


X = rng.standard_normal((2048, n_in))
T = sn.rms_norm_forward(X @ rng.standard_normal((d, n_in)).T)[0] + 0.5 * rng.standard_normal((2048, d))
steps, lr = lesson.pick(300, 600), 2.0
with one_blas_thread():                          # small matrices: BLAS threads cost more than they save
    runs = [{scale: train(X, T, scale, lr, steps, seed) for scale in (1.0, 4.0)} for seed in range(lesson.seeds)]
h1, h4 = runs[0][1.0], runs[0][4.0]
first_ratio = h1[0, 1] / h4[0, 1]
check(abs(first_ratio - 16) < 1e-3 * 16, "4x larger weights: a 16x smaller relative step at the same start")
grows = np.all(np.diff(h1[:, 0]) >= -1e-9 * h1[:-1, 0]) and h1[-1, 0] > 1.2 * h1[0, 0]
check(grows and np.abs(h1[:, 3]).max() < 1e-4, "dW is orthogonal to W (up to eps), so SGD only lengthens W")
check(all(r[1.0][-1, 2] < 0.8 * r[1.0][0, 2] for r in runs), "the run learns")
reach = [steps_to_target(r[1.0], r[4.0], lr) for r in runs]
slower = geometric_interval([k4 / k1 for (k1, k4), _, _ in reach])
on_clock = geometric_interval([c4 / c1 for _, (c1, c4), _ in reach])
lesson.claim("Large weights get smaller updates: an implicit learning-rate adaptation", source=paper("§4.2"),
             measured=f"SGD, lr {lr:g}, {len(runs)} seeds: a 4× larger start has a {first_ratio:.2f}× smaller relative "
                      f"step (exact) and takes {interval(*slower, fmt='{:.1f}')} times the steps to come 90% "
                      f"of the way down to the floor (geometric mean, paired; seed 0: {reach[0][0][0]} against "
                      f"{reach[0][0][1]} steps); counted in Σ lr/‖W‖², scale 4 over scale 1 = "
                      f"{interval(*on_clock, n=len(runs))}; ‖W‖ of the scale-4 run changes by "
                      f"{h4[-1, 0] / h4[0, 0] - 1:+.1%}",
             value=slower[0], interval=tuple(slower[1:]), **above(4, approx=1.5), expect=VERDICTS)

# %% [markdown]
# The figure, for the first seed: $\lVert W\rVert$; the two factors of the relative step, the implicit
# learning rate $\eta/\lVert W\rVert^2$ (solid) and the gradient at unit norm
# $\lVert W\rVert\,\lVert\partial L/\partial W\rVert$ (dashed, right axis), so that the shrinking that comes
# from $\lVert W\rVert$ is not confused with the shrinking that comes from learning; and the loss on 512 fixed
# training examples, with the target and the step each run reaches it. In the scale-4 run $\lVert W\rVert$ hardly
# moves: its implicit learning rate is flat, and its relative step falls only because the model learns.

# %%
fig, axes = plt.subplots(1, 3, figsize=(15, 4.4), constrained_layout=True)
t = np.arange(1, steps + 1)
grad_axis = axes[1].twinx()
(k1, k4), _, target = reach[0]
for (scale, h), shade, k in zip(runs[0].items(), (color("RMSNorm"), "k"), (k1, k4)):
    label = f"start ‖W‖ = {h[0, 0]:.1f} (scale {scale:g})"
    axes[0].plot(t, h[:, 0], color=shade, label=label)
    axes[1].loglog(t, lr / h[:, 0] ** 2, color=shade, label=f"scale {scale:g}")
    grad_axis.loglog(t, h[:, 1] * h[:, 0] ** 2 / lr, "--", color=shade, lw=1)
    axes[2].semilogy(t, h[:, 2], color=shade, label=f"{label}: {k} steps to the target")
    axes[2].plot(k, h[k - 1, 2], "o", color=shade)
axes[2].axhline(target, color="k", lw=0.8, ls=":")
axes[0].set(xlabel="SGD step", ylabel="‖W‖ (Frobenius)", title="the weight norm only grows")
axes[1].set(xlabel="SGD step", ylabel="implicit learning rate lr / ‖W‖² (solid)",
            title="the relative step = lr/‖W‖² × ‖W‖‖dL/dW‖")
grad_axis.set_ylabel("‖W‖ · ‖dL/dW‖ (dashed)")
grad_axis.grid(False)
axes[2].set(xlabel="SGD step", ylabel="loss on 512 training examples (MSE / 2)",
            title="loss; dotted: 90% of the way to the floor")
for ax in axes[::2]:
    ax.legend(fontsize=8)
axes[1].legend(fontsize=8, loc="center left", bbox_to_anchor=(0, 0.4))
fig.suptitle(f"Linear → RMSNorm trained by SGD with a fixed learning rate {lr:g} (RMSNorm in both; seed 0)")
lesson.save(fig, "training")

# %% [markdown]
# ## Questions
#
# **1.** For $\delta \ge 1$, $\lVert \partial L/\partial W \rVert$ grows with $\delta$ without normalization and
# falls as $1/\delta$ with RMSNorm. Where does each slope come from?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"Without a norm (slope {slopes['no normalization']:+.2f}) the output v = (delta W x) g, and with it the "
              "residual v - target, grows like delta once it dwarfs the target, and dL/dW is that residual "
              f"times the fixed x. With RMSNorm (slope {slopes['RMSNorm']:+.3f}) v and the residual do not move "
              "with delta, and R(delta a) = R(a) / delta divides the gradient by delta.")

# %% [markdown]
# **2.** Scaling the input $x$ leaves $\partial L/\partial W$ unchanged to round-off with $\epsilon = 0$, but
# not with $\epsilon = 10^{-6}$. Why, and which $\delta$ does the most damage?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"With eps the layer divides by sqrt(ms + eps), which does not scale with delta, so R(delta a) is no "
              f"longer R(a) / delta: the relative change is {x_err_eps:.1e} for delta in 0.1..10, against "
              f"{x_err:.0e} with eps = 0. The smallest delta does the most damage, since eps / ms grows as delta^-2.")

# %% [markdown]
# **3.** Counted in steps, the run with $4\times$ larger weights needed many more steps to reach the target loss.
# Counted on the clock $\sum_t \eta/\lVert W_t\rVert^2$, how far apart were they, and what does that say about
# what sets the pace?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"In steps the 4x larger start took {slower[0]:.1f}x as many, against the 16x of the first step: the "
              f"scale-1 run's own ||W|| grew from {h1[0, 0]:.2f} to {h1[k1 - 1, 0]:.2f} on its way to the target "
              f"(seed 0), which shrank its implicit learning rate. On the clock sum lr/||W||^2 the ratio was "
              f"{on_clock[0]:.2f}: near 1 would mean the weight norm alone sets the pace, the same direction moved "
              "by lr/||W||^2 per unit of gradient learning the same way at any scale.")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    "'dL/dW is inversely proportional to the weight scale': " + lesson.result("inversely proportional")
    + "; 'invariant to scaling the input': " + lesson.result("invariant to scaling the input x") + ".",
    "So a large weight takes small relative steps, an implicit learning rate lr/||W||^2; 'large weights get "
    "smaller updates', in steps to the loss target: " + lesson.result("Large weights get smaller updates") + ".")

# %%
lesson.finish()
