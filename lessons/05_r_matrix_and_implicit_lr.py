# %% [markdown]
# # The R matrix and the implicit learning rate: why large weights get small updates.
# The paper's gradient analysis takes a = W x and v = a / RMS(a) * g + b. The
# gradient with respect to W is, summed over the cases,
#
#     dL/dW = sum  (R (g * dL/dv)) x^T,   R = (1/RMS(a)) (I - a a^T / (d RMS(a)^2))
#
# R is RMSNorm's Jacobian (lesson 04). Scale a by delta (through x or W) and
# RMS(a) scales by delta too, so R(delta a) = R(a) / delta, while v, and with it
# dL/dv, does not change. Hence:
#
# * scale the input, x -> delta x: R / delta times x * delta, dL/dW is unchanged;
# * scale the weights, W -> delta W: dL/dW -> dL/dW / delta, a slope of -1 on
#   log-log axes. LayerNorm behaves the same; a layer without normalization
#   does not (its output, and the loss's gradient, grow with W).
#
# In training this is a learning-rate schedule nobody wrote. dL/dW is
# orthogonal to W (<dL/dW, W> = sum over cases of dL/da . a = 0, because R a = 0),
# so each SGD step W -> W - lr dL/dW lengthens W:
# ||W_new||^2 = ||W||^2 + lr^2 ||dL/dW||^2. The relative step lr ||dL/dW|| / ||W||
# falls like 1/||W||^2: a longer W turns more slowly. The output depends only
# on the direction of W, so this relative step is the one that matters.
#
# Figures
# * 05_r_matrix_and_implicit_lr_scaling.png: ||dL/dW|| against the weight
#   scale delta, with fitted slopes.
# * 05_r_matrix_and_implicit_lr_training.png: a short SGD run of Linear ->
#   RMSNorm on a noisy regression task, started at two weight scales: ||W||
#   grows, the relative step shrinks, and the run with 4x larger weights
#   starts with a 16x smaller relative step.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numpy as np

import scratchnorm as sn
from lessons._grading import below
from lessons._common import HOLDS, check, paper, start

lesson = start(__name__, "05_r_matrix_and_implicit_lr")

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


def train(X, T, scale, lr, steps, seed):
    """SGD on Linear(bias=False) -> RMSNorm; returns ||W||, relative step, loss, cos(dW, W) per step."""
    rng = np.random.default_rng(seed)
    linear = sn.Linear(X.shape[1], T.shape[1], bias=False, seed=1)
    norm = sn.RMSNorm(T.shape[1], elementwise_affine=False)
    linear.params["weight"] = linear.params["weight"] * scale
    history = []
    for _ in range(steps):
        idx = rng.integers(0, len(X), 64)
        v = norm.forward(linear.forward(X[idx]))
        linear.backward(norm.backward((v - T[idx]) / v.size))
        W, dW = linear.params["weight"], linear.grads["weight"]
        w_norm, g_norm = np.linalg.norm(W), np.linalg.norm(dW)
        history.append((w_norm, lr * g_norm / w_norm, 0.5 * np.mean((v - T[idx]) ** 2),
                        np.sum(W * dW) / (w_norm * g_norm)))
        linear.params["weight"] = W - lr * dW
    return np.array(history)


# %%
rng = np.random.default_rng(5)
n, n_in, d = lesson.pick(64, 256), 24, 24
x, W = rng.standard_normal((n, n_in)), rng.standard_normal((d, n_in)) / np.sqrt(n_in)
g, target, dv = rng.uniform(0.5, 1.5, d), rng.standard_normal((n, d)), rng.standard_normal((n, d))

# R(delta a) = R(a) / delta
a = W @ x[0]
deltas = np.logspace(-3, 3, 13)
r_err = max(np.max(np.abs(sn.rms_norm_jacobian(s * a) * s - sn.rms_norm_jacobian(a))) for s in deltas)
r_err /= np.max(np.abs(sn.rms_norm_jacobian(a)))
lesson.claim("R(δa) = R(a)/δ", source=paper("§4.2, eq. 10"),
             measured=f"max relative deviation {r_err:.1e} for δ in 1e-3..1e3",
             value=r_err, **below(1e-12, approx=1e-6), expect=HOLDS)

# The paper's formula against the fast path (Linear, then RMSNorm, then backward).
a_all, lin_cache = sn.linear_forward(x, W)
_, cache = sn.rms_norm_forward(a_all, g, eps=0.0)
fast = sn.linear_backward(sn.rms_norm_backward(dv, cache)["x"], lin_cache)["weight"]
via_r = sn.linear_rms_norm_dW_via_R(x, W, g, dv)
formula_err = np.max(np.abs(fast - via_r)) / np.max(np.abs(fast))
lesson.claim("dL/dW = Σ xᵀ ⊗ (diag(g ⊙ dL/dv) × R)", source=paper("§4.2, eq. 9"),
             measured=f"formula vs backward pass: max relative difference {formula_err:.1e}",
             value=formula_err, **below(1e-12, approx=1e-6), expect=HOLDS)

# Scaling the input leaves dL/dW alone.
base = weight_grad(x, W, g, target, "RMSNorm")
x_err = max(np.max(np.abs(weight_grad(s * x, W, g, target, "RMSNorm") - base)) for s in deltas)
x_err_eps = max(np.max(np.abs(weight_grad(s * x, W, g, target, "RMSNorm", 1e-6) - base))
                for s in np.logspace(-1, 1, 5))
x_err, x_err_eps = x_err / np.max(np.abs(base)), x_err_eps / np.max(np.abs(base))
lesson.claim("dL/dW is invariant to scaling the input x", source=paper("§4.2"),
             measured=f"max relative change {x_err:.1e} for δ in 1e-3..1e3 (eps = 0); "
                      f"{x_err_eps:.1e} for δ in 0.1..10 with eps = 1e-6",
             value=x_err, **below(1e-12, approx=1e-6), expect=HOLDS)

# ||dL/dW|| against the weight scale.
deltas = np.logspace(-2, 2, lesson.pick(9, 17))
fig, ax = plt.subplots(figsize=(6.8, 4.5))
slopes = {}
for norm, style in [("RMSNorm", dict(marker="o", ms=8, mfc="none", lw=2.5, alpha=0.6)),
                    ("LayerNorm", dict(marker="s", ms=3, ls="--")), (None, dict(marker="^", ms=4))]:
    sizes = np.array([np.linalg.norm(weight_grad(x, s * W, g, target, norm)) for s in deltas])
    name = norm or "no normalization"
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

# A short training run: the weight norm grows, the relative step shrinks.
X = rng.standard_normal((2048, n_in))
T = sn.rms_norm_forward(X @ rng.standard_normal((d, n_in)).T)[0] + 0.5 * rng.standard_normal((2048, d))
steps, lr = lesson.pick(150, 600), 2.0
runs = {scale: train(X, T, scale, lr, steps, seed=7) for scale in (1.0, 4.0)}
h1, h4 = runs[1.0], runs[4.0]
first_ratio = h1[0, 1] / h4[0, 1]
grows = np.all(np.diff(h1[:, 0]) >= -1e-9 * h1[:-1, 0]) and h1[-1, 0] > 1.2 * h1[0, 0]
check(grows, "with dW orthogonal to W, SGD only lengthens W")
check(h1[-1, 2] < 0.8 * h1[0, 2], "the run learns")
lesson.claim("Large weights get smaller updates: an implicit learning-rate adaptation", source=paper("§4.2"),
             measured=f"SGD, lr {lr:g}: ‖W‖ {h1[0, 0]:.2f} → {h1[-1, 0]:.2f}; relative step "
                      f"{h1[0, 1]:.2e} → {h1[-1, 1]:.2e}; 4× larger start: step {first_ratio:.2f}× smaller "
                      f"(δ² = 16); max |cos(dW, W)| = {np.abs(h1[:, 3]).max():.1e}",
             value=abs(first_ratio - 16) / 16, **below(1e-3, approx=1e-1), expect=HOLDS)

fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), constrained_layout=True)
t = np.arange(1, steps + 1)
for scale, h in runs.items():
    label = f"start ‖W‖ = {h[0, 0]:.1f} (scale {scale:g})"
    axes[0].plot(t, h[:, 0], label=label)
    axes[1].loglog(t, h[:, 1], label=label)
    axes[2].semilogy(t, h[:, 2], label=label, alpha=0.8)
axes[0].set(xlabel="SGD step", ylabel="‖W‖ (Frobenius)", title="the weight norm only grows")
axes[1].set(xlabel="SGD step", ylabel="lr · ‖dL/dW‖ / ‖W‖", title="the relative step shrinks")
axes[2].set(xlabel="SGD step", ylabel="loss (mean squared error / 2)", title="loss (noisy targets)")
for ax in axes:
    ax.legend()
fig.suptitle(f"Linear → RMSNorm trained by SGD with a fixed learning rate {lr:g}")
lesson.save(fig, "training")

# %%
lesson.finish()
