# %% [markdown]
# # What normalization does to training: weight decay as a learning-rate knob, and a smoother landscape.
#
# Two ideas a learner meets right after the RMSNorm paper, each measured here on a small model.
#
# **Scale-invariant weights.** Lesson 05 showed that a weight $W$ feeding a normalization does not change
# the output when scaled, $L(cW) = L(W)$, and that its gradient scales as $1/c$. Two facts follow. The
# gradient is orthogonal to the weight, $\langle W, \nabla L \rangle = 0$ (differentiate $L(cW)$ in $c$ at
# $c = 1$). And what an SGD step of size $\eta$ does to the *direction* of $W$ depends on $\eta/\|W\|^2$, the
# *effective learning rate*. Van Laarhoven (2017) concluded that weight decay has no regularizing effect
# on such weights: it sets their scale, and with it the effective learning rate. Zhang et al. (2019) list
# raising the effective learning rate as one of three mechanisms by which weight decay helps.
#
# **The landscape.** Santurkar et al. (2018) argued that BatchNorm does not work by reducing "internal
# covariate shift" (the drift of a layer's input distribution while the layers before it train): BatchNorm
# with noise added after it, which makes that drift larger, trained about as well in their networks. What
# BatchNorm does, they argued, is make the loss landscape smoother, so that the gradient predicts the loss
# over a longer step.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numpy as np

import scratchnorm as sn
from lessons._common import VERDICTS, check, start, work
from lessons._grading import below, control, within
from lessons._stats import mean_interval
from lessons._style import color
from lessons._training import interval, report
from scratchnorm import nn

lesson = start(__name__, "22_weight_decay_and_the_landscape")

# %% [markdown]
# ## The task
#
# A pool of 4096 inputs $x \sim N(0, I_{32})$ labelled by a random teacher network, with labels *sampled*
# from the teacher's softmax: the task is noisy, so the loss never reaches zero and the gradient never
# vanishes, as in real training. Each step draws a minibatch of 64 from the pool. Everything is seeded.

# %%
D_IN, CLASSES, POOL, BATCH = 32, 10, 4096, 64


def task(seed):
    """x (POOL, 32) and integer labels sampled from a random two-layer teacher's softmax."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((POOL, D_IN))
    logits = np.maximum(x @ rng.standard_normal((D_IN, 64)), 0) @ rng.standard_normal((64, CLASSES)) / 8
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return x, (p.cumsum(1) > rng.uniform(size=(POOL, 1))).argmax(1)


def sgd_step(model, lr, weight_decay=0.0):
    """Plain SGD with weight decay on every parameter: p <- p - lr (dL/dp + weight_decay p)."""
    for name, p in model.params.items():
        p -= lr * (model.grads[name] + weight_decay * p)


# %% [markdown]
# ## Part 1: the equilibrium of a scale-invariant weight
#
# The model is $x \to W_1 x$ (no bias) $\to$ RMSNorm $\to$ ReLU $\to$ a linear readout, so the loss is
# invariant to the scale of $W_1$. Write $g = \nabla_{W_1} L$ and $u = \|W_1\|\, g$, the gradient the same
# direction would have at unit norm. One SGD step with weight decay $\lambda$ is
# $W_1 \leftarrow (1 - \eta\lambda) W_1 - \eta g$, and since $g \perp W_1$,
#
# $$
# \|W_1'\|^2 = (1 - \eta\lambda)^2 \|W_1\|^2 + \eta^2 \frac{\|u\|^2}{\|W_1\|^2}.
# $$
#
# Decay shrinks the norm, the gradient's orthogonal push grows it, and the push is largest when the norm is
# small. The two balance where $\|W_1\|^4 \bigl(2\eta\lambda - \eta^2\lambda^2\bigr) = \eta^2\, \mathrm{E}\|u\|^2$:
#
# $$
# \|W_1^*\| = \Bigl(\frac{\eta\, \mathrm{E}\|u\|^2}{2\lambda - \eta\lambda^2}\Bigr)^{1/4}, \qquad
# \tan\theta^* = \frac{\eta \|g\|}{(1-\eta\lambda)\|W_1\|}
# = \frac{\sqrt{2\eta\lambda - \eta^2\lambda^2}}{1 - \eta\lambda} \approx \sqrt{2\eta\lambda}
# $$
#
# in the root mean square, where $\theta$ is the angle $W_1$ turns in one step. The cell trains three
# settings with the same $\eta\lambda = 10^{-3}$ and one without weight decay, records $\|W_1\|$, $\|u\|^2$
# and the angle at every step, and checks the orthogonality that the derivation rests on.

# %%
SETTINGS = ((0.2, 0.005), (0.1, 0.01), (0.05, 0.02), (0.1, 0.0))     # (lr, weight decay)
STEPS = lesson.pick(600, 2000)


def train_scale_invariant(seed, lr, weight_decay):
    """||W1|| after each step, ||u||^2 = (||W1|| ||g||)^2, tan of the angle W1 turns, |cos(W1, g)|."""
    x, y = task(seed)
    rng = np.random.default_rng(seed + 1)
    model = nn.Sequential(sn.Linear(D_IN, 64, bias=False, seed=seed, backend="numpy"),
                          sn.RMSNorm(64, backend="numpy"), nn.ReLU(), sn.Linear(64, CLASSES, seed=seed + 7,
                                                                                  backend="numpy"))
    ce = nn.SoftmaxCrossEntropy(backend="numpy")
    rec = np.zeros((STEPS, 4))
    for t in range(STEPS):
        idx = rng.integers(0, POOL, BATCH)
        ce.forward(model.forward(x[idx]), y[idx])
        model.backward(ce.backward())
        W, g = model.params["0.weight"], model.grads["0.weight"]
        before, w_norm, g_norm = W.copy(), np.linalg.norm(W), np.linalg.norm(g)
        sgd_step(model, lr, weight_decay)
        cos = np.sum(before * W) / (w_norm * np.linalg.norm(W))
        rec[t] = (np.linalg.norm(W), (w_norm * g_norm) ** 2, np.tan(np.arccos(min(cos, 1.0))),
                  abs(np.sum(before * g)) / (w_norm * g_norm))
    return rec


runs = {s: [train_scale_invariant(seed, *s) for seed in range(lesson.seeds)] for s in SETTINGS}
check(max(r[:, 3].max() for rs in runs.values() for r in rs) < 1e-4, "the gradient is orthogonal to W1")

# %% [markdown]
# The last quarter of each run is taken as the equilibrium (the figure below shows the runs arriving): the
# cell compares the measured norm with the norm the balance predicts from the measured
# $\mathrm{E}\|u\|^2$, and the root-mean-square angle with $\theta^*$, per seed. These are checks of the
# derivation, not claims: given $g \perp W_1$ (checked above) and the measured $\mathrm{E}\|u\|^2$, a run
# that has settled can only sit at the balance, so no verdict could come out the other way. What the
# derivation teaches is in its form: question 2 asks what.

# %%
late = slice(3 * STEPS // 4, None)
decayed = [s for s in SETTINGS if s[1] > 0]


def predicted_norm(lr, wd, u2):
    return (lr * u2 / (2 * wd - lr * wd ** 2)) ** 0.25


norm_ratio = [[np.mean(r[late, 0]) / predicted_norm(*s, np.mean(r[late, 1])) for r in runs[s]] for s in decayed]
theta_star = {s: np.sqrt(2 * s[0] * s[1] - (s[0] * s[1]) ** 2) / (1 - s[0] * s[1]) for s in decayed}
angle_ratio = [[np.sqrt(np.mean(r[late, 2] ** 2)) / theta_star[s] for r in runs[s]] for s in decayed]
norm_m, angle_m = mean_interval(np.mean(norm_ratio, axis=0)), mean_interval(np.mean(angle_ratio, axis=0))
norms_at = {s: np.mean([np.mean(r[late, 0]) for r in runs[s]]) for s in decayed}
k, tol = lesson.seeds, lesson.pick(0.4, 0.05)             # a quick run is too short to settle: a loose bound
check(np.all(np.abs(np.r_[norm_m, angle_m] - 1) < tol),
      "at equilibrium the norm is the balance's (from the measured E||u||^2), the angle per step theta*")
report(lesson, f"  equilibrium, the last quarter of {STEPS} steps: ||W1|| over the balance's {interval(*norm_m, n=k)};"
               f" RMS tan(angle) over theta* {interval(*angle_m, n=k)}")

# %% [markdown]
# The figure: the norm of $W_1$ and the angle it turns per step, against the step, for the four settings
# (mean over seeds); dashed, the predicted equilibria; grey, the run without weight decay (question 1 asks
# what it does).

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
steps = np.arange(1, STEPS + 1)
for s, c in zip(SETTINGS, (*plt.cm.viridis([0.1, 0.45, 0.8]), "0.4")):    # settings, not norms: viridis
    rec = np.mean(runs[s], axis=0)
    label = f"lr {s[0]:g}, wd {s[1]:g}"
    axes[0].plot(steps, rec[:, 0], color=c, label=label)
    smooth = np.sqrt(np.convolve(rec[:, 2] ** 2, np.ones(50) / 50, mode="valid"))     # RMS over 50 steps
    axes[1].plot(steps[25:25 + len(smooth)], smooth, color=c, label=label)
    if s[1] > 0:
        axes[0].axhline(predicted_norm(*s, np.mean(rec[late, 1])), color=c, ls="--", lw=1)
axes[1].axhline(theta_star[decayed[0]], color="k", ls="--", lw=1, label="√(2 lr wd), lr wd = 1e-3")
axes[0].set(xlabel="step", ylabel="||W1||", title="the norm settles where decay balances the gradient")
axes[1].set(xlabel="step", ylabel="angle turned per step (RMS over 50 steps)", yscale="log",
            title="the angle W1 turns per step, against θ* (dashed)")
for ax in axes:
    ax.legend(fontsize=8)
lesson.save(fig, "equilibrium")

# %% [markdown]
# ## Part 2: does BatchNorm smooth the landscape, and is it internal covariate shift?
#
# A 6-hidden-layer ReLU MLP of width 64 (He initialization, so that it trains without normalization too),
# with no normalization, with BatchNorm after each hidden linear layer, and with *noisy* BatchNorm: after
# each BatchNorm, every unit is scaled by a factor drawn from $U(0.75, 1.5)$ and shifted by one from
# $U(-0.5, 0.5)$, drawn anew at every step, so the next layer's input distribution moves at every step
# (Santurkar et al.'s test of internal covariate shift; their noise had a non-zero mean and non-unit
# variance, changing over time). SGD at $\eta = 0.2$: Santurkar et al.'s question is why BatchNorm helps, so it
# is asked where it does. At $\eta = 0.05$ this network trained as well without normalization as with it
# (the previous version of this lesson ran there, and no normalization ended slightly *below* BatchNorm); the
# larger step is where BatchNorm's help shows, and the cell after the training checks that it does.
#
# Every 40 steps, before the update, the cell measures how far the gradient predicts the landscape along
# the step about to be taken: for step multiples $s \in \{0.25, 0.5, 1, 2, 4\}$ of $\eta \nabla L$, the
# change of the gradient over the length of the step, $\|\nabla L(w - s\eta\nabla L) - \nabla L(w)\| /
# \|s\eta \nabla L\|$; its largest value over $s$ is the *effective $\beta$-smoothness*, Santurkar et
# al.'s measure (smaller: smoother, the gradient stays predictive over longer steps).

# %%
WIDTH, DEPTH, LR, MULTIPLES = 64, 6, 0.2, (0.25, 0.5, 1.0, 2.0, 4.0)
SMOOTH_STEPS, PROBE_EVERY = lesson.pick(120, 400), 40


class NoisyBatchNorm(sn.BatchNorm):
    """BatchNorm, then a random scale and shift per unit, drawn anew at every training step."""

    def __init__(self, d, rng, **kw):
        super().__init__(d, **kw)
        self.rng = rng

    def _forward(self, x):
        y, cache = super()._forward(x)
        if not self.training:
            return y, (cache, None)
        scale, shift = self.rng.uniform(0.75, 1.5, y.shape[1]), self.rng.uniform(-0.5, 0.5, y.shape[1])
        return y * scale + shift, (cache, scale)

    def _backward(self, dy, cache_and_scale):
        cache, scale = cache_and_scale
        return super()._backward(dy if scale is None else dy * scale, cache)


def deep_mlp(kind, seed):
    rng = np.random.default_rng(seed + 100)
    norm = {"none": None, "batchnorm": "batchnorm",
            "noisy": lambda d: NoisyBatchNorm(d, rng, backend="numpy")}[kind]
    model = nn.mlp([D_IN] + [WIDTH] * DEPTH + [CLASSES], norm=norm, seed=seed, backend="numpy")
    for name in model.params:
        if name.endswith("weight") and model.params[name].ndim == 2:
            model.params[name] = model.params[name] * np.sqrt(6.0)     # U(±1/√fan_in) -> He: var 2/fan_in
    return model


def loss_and_grad(model, ce, xb, yb):
    loss = ce.forward(model.forward(xb), yb)
    model.backward(ce.backward())
    return loss, np.concatenate([g.ravel() for g in model.grads.values()])


def beta_smoothness(model, ce, xb, yb):
    """max over s of ||grad(w - s lr grad) - grad(w)|| / ||s lr grad||; the parameters are restored."""
    _, g0 = loss_and_grad(model, ce, xb, yb)
    saved = {k: v.copy() for k, v in model.params.items()}
    grads = {k: v.copy() for k, v in model.grads.items()}
    worst = 0.0
    for s in MULTIPLES:
        for k in saved:
            model.params[k][...] = saved[k] - s * LR * grads[k]
        worst = max(worst, np.linalg.norm(loss_and_grad(model, ce, xb, yb)[1] - g0) / (s * LR * np.linalg.norm(g0)))
    for k in saved:
        model.params[k][...] = saved[k]
    return worst


def train_deep(kind, seed):
    """(final loss: mean of the last quarter's minibatch losses, median effective beta-smoothness)."""
    x, y = task(seed)
    rng = np.random.default_rng(seed + 1)
    model, ce = deep_mlp(kind, seed), nn.SoftmaxCrossEntropy(backend="numpy")
    losses, beta = [], []
    for t in range(SMOOTH_STEPS):
        idx = rng.integers(0, POOL, BATCH)
        if kind != "noisy" and t % PROBE_EVERY == 0:
            beta.append(beta_smoothness(model, ce, x[idx], y[idx]))
        losses.append(loss_and_grad(model, ce, x[idx], y[idx])[0])
        sgd_step(model, LR)
    return np.array(losses), np.array(beta)


deep = {kind: [train_deep(kind, seed) for seed in range(lesson.seeds)] for kind in ("none", "batchnorm", "noisy")}
final = {kind: [np.mean(r[0][-SMOOTH_STEPS // 4:]) for r in runs_] for kind, runs_ in deep.items()}
check(all(np.isfinite(v).all() for v in final.values()), "every run trains to a finite loss")

# %% [markdown]
# First the premise: BatchNorm helps here, the final loss without normalization minus BatchNorm's (paired by
# seed) is above 0. Then the two claims: the ratio of the median $\beta$-smoothness with BatchNorm to
# without (paired by seed, geometric mean, below 1: BatchNorm smoother), and the final-loss gap between noisy
# BatchNorm and BatchNorm (paired; near 0: the noise, and the covariate shift it adds, cost nothing). "About as
# well" is an equivalence, and its band (within 0.05 nats holds, within 0.15 approximately) says something only
# if it can fail: its control is no normalization against BatchNorm, the same gap on the same seeds, which must
# lie outside the band. If no normalization trains "about as well as BatchNorm" too, the claim is inconclusive by
# construction (`lessons/_grading.py`, `beside_control`); if the control's interval straddles the edge of the band
# the claim met (0.05 for "holds", 0.15 for "approximately"), that band does not surely tell BatchNorm from none,
# and a noisy BatchNorm inside it would read inconclusive too.

# %%
none_gap = mean_interval(np.subtract(final["none"], final["batchnorm"]))
check(none_gap[0] > 0, "BatchNorm helps this network train: no normalization ends above BatchNorm's loss")
smoother = np.exp(mean_interval([np.log(np.median(b[1]) / np.median(n[1]))
                                 for b, n in zip(deep["batchnorm"], deep["none"])]))
lesson.claim("BatchNorm makes the loss landscape smoother: the gradient changes less along the step",
             source=work("santurkar", "§3"),
             measured=f"6 hidden layers of 64, SGD lr {LR}, {SMOOTH_STEPS} steps; median effective beta-smoothness "
                      f"over the run, BatchNorm / none, paired: " + interval(*smoother, n=k) + "; where BatchNorm "
                      f"helps: final loss, no normalization - BatchNorm {interval(*none_gap, n=k)} nats",
             value=smoother[0], interval=smoother[1:], **below(0.9, approx=1.0), expect=VERDICTS)
noisy_gap = mean_interval(np.subtract(final["noisy"], final["batchnorm"]))
lesson.claim("BatchNorm with noise after it, which adds internal covariate shift, trains about as well as "
             "BatchNorm", source=work("santurkar", "§2"),
             measured=f"final loss (last quarter of {SMOOTH_STEPS} steps), noisy BatchNorm - BatchNorm, paired: "
                      f"{interval(*noisy_gap, n=k)} nats; BatchNorm ends at {np.mean(final['batchnorm']):.3f}",
             value=noisy_gap[0], interval=noisy_gap[1:], **within(-0.05, 0.05, approx=(-0.15, 0.15)),
             control=control("no normalization against BatchNorm", none_gap[0], none_gap[1:]), expect=VERDICTS)
placebo = f"{lesson.claims[-1].control['verdict']} ({interval(*none_gap)} nats)"

# %% [markdown]
# The figure: the training loss of the three networks (mean over seeds, smoothed over 25 steps), and the
# effective $\beta$-smoothness along the run, with and without BatchNorm.

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
labels = {"none": "no norm", "batchnorm": "BatchNorm", "noisy": "noisy BatchNorm"}
for kind, runs_ in deep.items():
    c = color("batchnorm" if kind == "noisy" else kind)                  # noisy BatchNorm: BatchNorm's, dashed
    loss = np.convolve(np.mean([r[0] for r in runs_], axis=0), np.ones(25) / 25, mode="valid")
    axes[0].plot(np.arange(len(loss)) + 25, loss, "--" if kind == "noisy" else "-", color=c, label=labels[kind])
    if kind != "noisy":
        axes[1].plot(np.arange(0, SMOOTH_STEPS, PROBE_EVERY), np.mean([r[1] for r in runs_], axis=0), "o-", ms=3,
                     color=c, label=labels[kind])
axes[0].set(xlabel="step", ylabel="training loss (nats)", title="training, 6 hidden layers, SGD")
axes[1].set(xlabel="step", ylabel="effective β-smoothness (log)", yscale="log",
            title="how fast the gradient changes along the step")
for ax in axes:
    ax.legend(fontsize=8)
lesson.save(fig, "landscape")

# %% [markdown]
# ## Questions
#
# **1.** Without weight decay, what happens to the effective learning rate of a scale-invariant weight as
# training goes on, and why might that look like a learning-rate schedule?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
no_wd = np.mean(runs[(0.1, 0.0)], axis=0)
half, tenth = STEPS // 2, STEPS // 10
first, second = no_wd[half, 0] - no_wd[0, 0], no_wd[-1, 0] - no_wd[half, 0]
shape = "slower" if second < 0.8 * first else "faster" if second > 1.25 * first else "not clearly faster or slower"
lesson.answer(f"The orthogonal push only ever grows the norm: ||W1|| went from {no_wd[0, 0]:.2f} to "
              f"{no_wd[-1, 0]:.2f} here, so lr/||W1||^2 fell by {(no_wd[-1, 0] / no_wd[0, 0]) ** 2:.2f}x: a decay of "
              f"the learning rate nobody scheduled. Each step adds lr^2 ||u||^2 / ||W1||^2 to ||W1||^2, which slows "
              f"the growth only if ||u||^2 stays put. Here the norm grew by {first:.2f} over the first {half} steps "
              f"and {second:.2f} over the last {STEPS - half}, {shape} in the second half, while ||u||^2 went from "
              f"{np.mean(no_wd[:tenth, 1]):.2f} (the first tenth of the run) to {np.mean(no_wd[-tenth:, 1]):.2f} "
              "(the last): the schedule it makes depends on the loss.")

# %% [markdown]
# **2.** The three settings with weight decay have norms a factor apart, yet turn the weight by the same
# angle per step. Which hyperparameter would you change to make a network with normalization train
# faster at equilibrium: the learning rate, the weight decay, or both?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"Only the product lr x wd matters at equilibrium: the angle is about sqrt(2 lr wd) "
              f"({theta_star[decayed[0]]:.4f} here for all three settings, measured ratio {angle_m[0]:.3f}), while "
              f"the norm ({', '.join(f'{v:.2f}' for v in norms_at.values())}) only absorbs the difference. The norm "
              "depends on the loss, through E||u||^2, the angle does not: it is read off the formula for tan(theta*), "
              "where E||u||^2 cancels. Doubling either one turns the weight about sqrt(2) times faster.")

# %% [markdown]
# **3.** Noisy BatchNorm moves every layer's input distribution at every step. If reducing that drift were
# what made BatchNorm work, what would the noisy network's loss do, and what did it do here?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
cost = ("cost something: its whole interval is above 0" if noisy_gap[1] > 0 else
        "cost nothing measurable: its interval reaches 0 or below")
share = noisy_gap[0] / none_gap[0]
lesson.answer(f"It would end behind BatchNorm, toward the network without normalization, which ends above "
              f"BatchNorm here by (nats) {interval(*none_gap, n=k)}. The noise {cost} (noisy BatchNorm - BatchNorm, "
              f"nats: {interval(*noisy_gap, n=k)}), {share:.1f} times the cost of removing BatchNorm altogether. "
              "Santurkar et al.'s noisy networks trained about as well as BatchNorm; here the noise "
              + ("costs as much as BatchNorm's help or more" if share >= 1 else "costs part of BatchNorm's help")
              + ": a small MLP is not their network, and how much a given noise costs depends on its size, so "
              "the verdict is about this setting.")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    "For a weight whose scale the loss cannot see, weight decay sets the norm, and through it the step: the "
    f"angle the weight turns per step settles at sqrt(2 lr wd) whatever the loss (checked: {angle_m[0]:.3f} of "
    "it). Tune lr x wd together; without decay the norm grows and the effective step shrinks unscheduled.",
    "Where BatchNorm helps this network train (no normalization ends "
    f"{none_gap[0]:.2f} nats behind it), 'BatchNorm's landscape is smoother', by the effective beta-smoothness: "
    + lesson.result("landscape smoother") + "; 'noise after it costs nothing': " + lesson.result("noise after it")
    + "; its control, no normalization against BatchNorm: " + placebo + ". A measure of smoothness is evidence "
    "about one setting, not a mechanism.")

# %%
lesson.finish()
