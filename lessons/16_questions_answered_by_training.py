# %% [markdown]
# # Questions answered by training: the Euclidean norm, a learnable eps, RMSNorm with a bias, the row mean.
#
# Four questions, each settled by training the same small model with one change, on the same batches, over
# several seeds (`--seeds`; every comparison is paired, the difference on one seed, and graded on its 95%
# interval). Three are claims of the paper and of explainer 000; the learnable eps is our question about a layer
# explainer 000 gives only as code.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numpy as np

import scratchnorm as sn
from lessons._common import COMMON, VERDICTS, explainer, paper, start
from lessons._grading import above, control, within
from lessons._stats import mean_interval
from lessons._style import color
from lessons._training import interval, one_blas_thread, paired, race
from lessons._training_plots import STYLE
from scratchnorm import nn

lesson = start(__name__, "16_questions_answered_by_training")

# %% [markdown]
# ## The Euclidean norm (paper §4)
#
# $$\frac{x}{\lVert x\rVert} = \frac{x}{\sqrt{d}\,\mathrm{RMS}(x)}$$
#
# differs from $x / \mathrm{RMS}(x)$ only by the factor $\sqrt d$, which a weight $g$ could absorb. The paper
# reports that it does not work, and guesses that the scale should follow the vector's size. Here it is a
# layer, $y = x / \lVert x\rVert \odot g$ with $g$ starting at 1 (the lesson calls it L2Norm), in place of
# RMSNorm in an MLP like lesson 10's (4 hidden layers of 64, Adam) on lesson 10's spirals, with two turns
# instead of three: the same function family, a different starting scale and a different step for Adam, which
# moves $g$ by about the learning rate per step whatever its size.

# %%
WIDTH, DEPTH, BATCH, LR = 64, 4, 128, 3e-3


class L2Norm(sn.RMSNorm):
    """y = x / ||x|| * weight = RMSNorm(x) * weight / sqrt(d): the Euclidean norm in place of the RMS."""

    def forward(self, x):
        return super().forward(x) / np.sqrt(self.d)

    def backward(self, dy):
        return super().backward(dy / np.sqrt(self.d))


# %% [markdown]
# ## The race
#
# Six versions of that MLP train on the same batches, seed by seed: RMSNorm, L2Norm, RMSNorm with a bias,
# RMSNorm with a learnable $\epsilon$ (the next two sections), LayerNorm, and the same MLP without a norm, the
# placebo beside which a "close to" is graded. At every evaluation the race also
# records the learnable $\lvert\epsilon\rvert$ of each layer. Each seed draws its own spirals (three arms of two
# turns, 4000 training and 2000 test points, as in lesson 10), its own initial weights and batches; what is
# graded is the test accuracy at the end, in eval mode.

# %%
MODELS = {"rmsnorm": "rmsnorm", "l2norm": lambda d: L2Norm(d, eps=1e-12), "rmsnorm_bias": "rmsnorm_bias",
          "learnable_eps": lambda d: sn.RMSNormLearnableEps(d, eps=1e-8), "layernorm": "layernorm", "none": None}
COLORS = {"rmsnorm": color("RMSNorm"), "l2norm": color("L2Norm"), "rmsnorm_bias": color("RMSNorm"),
          "learnable_eps": color("RMSNorm"), "layernorm": color("LayerNorm"), "none": STYLE["none"][0]}
LABELS = {"rmsnorm": "RMSNorm", "l2norm": "L2Norm x/‖x‖·g", "rmsnorm_bias": "RMSNorm + bias",
          "learnable_eps": "RMSNorm, learnable eps", "layernorm": "LayerNorm", "none": "no norm (placebo)"}


def spirals(n, rng, classes=3, turns=2.0, noise=0.03):
    """n points (n, 2) on ``classes`` interleaved spirals (lesson 10's) and their labels (n,): the arm."""
    arm = rng.integers(0, classes, n)
    r = np.sqrt(rng.uniform(0.02, 1.0, n))                    # uniform over the disc
    theta = 2 * np.pi * (turns * r + arm / classes)
    return 2 * (r[:, None] * np.c_[np.cos(theta), np.sin(theta)] + noise * rng.standard_normal((n, 2))), arm


def accuracy(model, x, y):
    model.eval()
    return float(np.mean(model.forward(x).argmax(axis=1) == y))


def spirals_race(lesson, seed, steps):
    rng = np.random.default_rng(160 + seed)
    (xtr, ytr), (xte, yte) = spirals(4000, rng), spirals(2000, rng)
    built = {k: nn.mlp([2] + [WIDTH] * DEPTH + [3], norm=f, seed=seed) for k, f in MODELS.items()}
    ce = nn.SoftmaxCrossEntropy()
    eps_path = []
    batches = [(xtr[b], ytr[b]) for b in rng.integers(0, len(xtr), (steps, BATCH))]
    runs = {k: (m, nn.Adam(m, lr=LR)) for k, m in built.items()}
    eps_layers = [layer for layer in built["learnable_eps"].children.values() if "eps" in layer.params]

    def evaluate(model):
        if model is built["learnable_eps"]:
            eps_path.append([abs(float(layer.params["eps"][0])) for layer in eps_layers])
        return float(ce.forward(model.forward(xte[:500]), yte[:500]))
    race(runs, batches, evaluate, every=max(1, steps // 20))
    return {k: accuracy(m, xte, yte) for k, m in built.items()}, np.array(eps_path)


k, steps = lesson.seeds, lesson.pick(40, 800)
with one_blas_thread():
    races = [spirals_race(lesson, s, steps) for s in range(k)]
acc = {m: np.array([r[0][m] for r in races]) for m in MODELS}

# %% [markdown]
# Does the Euclidean norm fail? The value is the accuracy lost against RMSNorm, paired per seed, graded on its
# 95% interval: the claim holds if the whole interval lies at least 5 points below RMSNorm, approximately if at
# least 2 points below; an interval wholly under 2 points says L2Norm works about as well (does not hold), and
# one that straddles 2 points is inconclusive.

# %%
short = paired(acc["rmsnorm"], acc["l2norm"])                       # accuracy lost with the Euclidean norm
lesson.claim("Normalizing by the Euclidean norm instead of the RMS does not work", source=paper("§4"),
             measured=f"spirals MLP, {DEPTH} hidden layers of {WIDTH}, Adam lr {LR:g}, {steps} steps: test "
                      f"accuracy RMSNorm {acc['rmsnorm'].mean():.3f}, L2Norm {acc['l2norm'].mean():.3f}; paired "
                      f"shortfall {interval(*short, n=k)} (holds: at least 5 points worse)",
             value=short[0], interval=short[1:], **above(0.05, approx=0.02), expect=VERDICTS)

# %% [markdown]
# ## A learnable eps (explainer 000 §6.2 gives it as code)
#
# Explainer 000 §6.2 lists an RMSNorm whose $\epsilon$ is a parameter, used through its absolute value,
# $y = x / \sqrt{\mathrm{ms}(x) + \lvert\epsilon\rvert} \odot g$, started at $10^{-8}$: code only, with no
# run and no statement of what training does to it. The question is ours: does it move? Its gradient is tiny,
# but Adam divides each step by the gradient's own size, so the parameter can move by about the learning rate
# per step anyway. `RMSNormLearnableEps` is that layer; the value is the factor by which
# $\lvert\epsilon\rvert$ grew in the median layer of a seed, its geometric mean over the seeds and 95% interval.

# %%
eps_end = np.concatenate([r[1][-1] for r in races])
moved = np.exp(mean_interval([np.log(np.median(r[1][-1] / 1e-8)) for r in races]))   # per seed: the median layer
lesson.claim("A learnable eps moves in training", source=f"{COMMON} (this lesson's own question: explainer 000 §6.2 "
             "gives the layer as code, with no run and no claim about training)",
             measured=f"RMSNormLearnableEps started at eps = 1e-8, Adam lr {LR:g}: after {steps} steps |eps| is "
                      f"{np.min(eps_end):.1e} to {np.max(eps_end):.1e} over {eps_end.size} layers; the median layer's "
                      f"factor, geometric mean over seeds {interval(*moved, fmt='{:.1e}', n=k)} (holds if it moves "
                      "by 10× or more)",
             value=moved[0], interval=tuple(moved[1:]), **above(10, approx=2), expect=VERDICTS)

# %% [markdown]
# ## RMSNorm with a bias "close to LayerNorm" (explainer 000 §6)
#
# Explainer 000 §6.4 names its RMSNorm with a bias "close to LayerNorm" (in the code's docstring). As a fixed
# function it is not: a bias is the same for every input, LayerNorm subtracts each input's own mean, and on
# inputs whose rows have different means no bias can make the one the other. The lesson fits the best bias by
# least squares, the mean over the rows of $\mathrm{LN}(x) - \mathrm{RMSNorm}(x)$, and measures what is left,
# $\lVert \mathrm{RMSNorm}(x) + b^\ast - \mathrm{LN}(x)\rVert / \lVert \mathrm{LN}(x)\rVert$, on rows with
# means of spread 1 and scales from 0.5 to 2: context, printed with the claim. But in a network the layers
# around the norm train too, and "close" is about the model that comes out. So the claim is graded on the race:
# the test accuracy of LayerNorm minus that of RMSNorm + bias, paired per seed, against an equivalence band
# declared here: it holds if the whole 95% interval lies within ±2 points, approximately within ±5 points; an
# interval wholly outside ±5 points refutes it, and one that straddles ±5 points is inconclusive. Its control:
# LayerNorm minus no norm, graded on the same band; if no norm is "close to LayerNorm" too, the task cannot tell
# a norm from none and the claim is inconclusive by construction.

# %%
rng = np.random.default_rng(16)
x = rng.standard_normal((256, 32)) * rng.uniform(0.5, 2, (256, 1)) + rng.normal(0, 1, (256, 1))
ln, rms = sn.layer_norm_forward(x)[0], sn.rms_norm_forward(x)[0]
best_bias = (ln - rms).mean(axis=0)                                    # least squares over the rows
resid = float(np.linalg.norm(rms + best_bias - ln) / np.linalg.norm(ln))
gap, gap_none = paired(acc["layernorm"], acc["rmsnorm_bias"]), paired(acc["layernorm"], acc["none"])
lesson.claim("RMSNorm with a bias is close to LayerNorm", source=explainer("000", "§6"),
             measured=f"trained in the race ({steps} steps): test accuracy LayerNorm {acc['layernorm'].mean():.3f}, "
                      f"RMSNorm + bias {acc['rmsnorm_bias'].mean():.3f}, no norm {acc['none'].mean():.3f}; LayerNorm "
                      f"minus RMSNorm + bias, paired {interval(*gap, n=k)} (holds: within ±0.02); the control, "
                      f"LayerNorm minus no norm, {interval(*gap_none, n=k)}. As a fixed function, on rows with means "
                      f"of spread 1 and scales 0.5–2, the best bias leaves a relative difference of {resid:.2f}",
             value=gap[0], interval=gap[1:], **within(-0.02, 0.02, approx=(-0.05, 0.05)),
             control=control("no norm against LayerNorm", gap_none[0], gap_none[1:]), expect=VERDICTS)

# %% [markdown]
# ## A label that is the row mean
#
# Explainer 000 §10.2 says RMSNorm may do worse on tasks that need centring. Here the label *is* the mean of
# each row of $x$, $t = \frac{1}{d}\sum_i x_i$, the quantity LayerNorm removes. A Linear before the norm can
# move it into other directions, so both might learn it: the lesson trains
# Linear $\to$ Norm $\to$ ReLU $\to$ Linear on it ($d = 16$) and compares the final error, the test MSE over
# the variance of the label, as a ratio RMSNorm / LayerNorm paired per seed (it holds if RMSNorm is 10% worse).

# %%
def row_mean_task(seed, steps, d=16):
    """Final test MSE / var(label) of Linear -> Norm -> ReLU -> Linear trained to output the row mean of x."""
    rng = np.random.default_rng(170 + seed)
    make = lambda n: rng.standard_normal((n, 1)) + rng.uniform(0.5, 2, (n, 1)) * rng.standard_normal((n, d))  # noqa
    xtr, xte = make(4000), make(1000)
    out = {}
    for norm in ("layernorm", "rmsnorm"):
        model, r = nn.mlp([d, 64, 1], norm=norm, seed=seed), np.random.default_rng(seed)
        opt = nn.Adam(model, lr=LR)
        for _ in range(steps):
            b = r.integers(0, len(xtr), BATCH)
            pred = model.forward(xtr[b])
            model.backward(2 * (pred - xtr[b].mean(1, keepdims=True)) / len(b))
            opt.step()
        model.eval()
        out[norm] = float(np.mean((model.forward(xte) - xte.mean(1, keepdims=True)) ** 2) / xte.mean(1).var())
    return out


with one_blas_thread():
    mean_task = [row_mean_task(s, lesson.pick(60, 1500)) for s in range(k)]
ratio = np.exp(paired(np.log([t["rmsnorm"] for t in mean_task]), np.log([t["layernorm"] for t in mean_task])))
lesson.claim("RMSNorm does worse on a task that needs the centring statistic (the label is the row mean)",
             source=explainer("000", "§10.2"),
             measured=f"Linear → Norm → ReLU → Linear, Adam: test MSE / var(label) RMSNorm "
                      f"{np.mean([t['rmsnorm'] for t in mean_task]):.4f}, LayerNorm "
                      f"{np.mean([t['layernorm'] for t in mean_task]):.4f}; RMSNorm / LayerNorm, paired: "
                      f"{interval(*ratio, n=k)} (holds: RMSNorm 10% worse)",
             value=ratio[0], interval=tuple(ratio[1:]), **above(1.1, approx=1.0), expect=VERDICTS)

# %% [markdown]
# The figure: the test accuracy per seed of RMSNorm, L2Norm, RMSNorm with a bias, learnable eps, LayerNorm
# and no norm; the learnable $\lvert\epsilon\rvert$ over training; the row-mean task's error.

# %%
fig, axes = plt.subplots(1, 3, figsize=(15, 4.4), layout="constrained")
for i, m in enumerate(MODELS):
    axes[0].plot(np.full(k, i), acc[m], "o", color=COLORS[m], alpha=0.8)
axes[0].set_xticks(range(len(MODELS)), [LABELS[m] for m in MODELS], rotation=20, ha="right")
axes[0].set(ylabel="test accuracy", title=f"Spirals, {k} seed{'s' * (k > 1)} (one dot each)")
for r in races:
    axes[1].semilogy(np.linspace(0, steps, len(r[1])), np.maximum(r[1], 1e-12), color="tab:blue", alpha=0.5)
axes[1].axhline(1e-8, color="k", lw=0.8, ls=":")
axes[1].set(xlabel="training step", ylabel="|eps|, one line per layer and seed",
            title="A learnable eps under Adam (dotted: its start, 1e-8)")
for i, norm in enumerate(("layernorm", "rmsnorm")):
    axes[2].plot(np.full(k, i), [t[norm] for t in mean_task], "o", color=STYLE[norm][0])
axes[2].set_xticks([0, 1], ["LayerNorm", "RMSNorm"])
axes[2].set(ylabel="test MSE / var(label)", title="Label = the row mean of x", xlim=(-0.6, 1.6))
lesson.save(fig, "results")

# %% [markdown]
# ## Questions
#
# **1.** $x / \lVert x\rVert$ and $x / \mathrm{RMS}(x)$ differ by a constant factor $\sqrt d$ that $g$ could
# absorb. What, then, differs when they are trained?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"Only the start and the steps: L2Norm's outputs start sqrt({WIDTH}) = {np.sqrt(WIDTH):.0f} times "
              f"smaller, and Adam moves g by about lr per step whatever its size, so g would have to travel from 1 "
              f"to about {np.sqrt(WIDTH):.0f} to give RMSNorm's starting scale. Here RMSNorm reached "
              f"{acc['rmsnorm'].mean():.3f} test accuracy, L2Norm {acc['l2norm'].mean():.3f}; paired shortfall "
              f"{interval(*short, n=k)}.")

# %% [markdown]
# **2.** The gradient of a learnable $\epsilon$ is tiny. Why does it still move far from $10^{-8}$ under Adam?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"Adam divides each step by the gradient's own running size, so even a tiny gradient moves the "
              f"parameter by up to about lr = {LR:g} per step: after {steps} steps |eps| is {np.min(eps_end):.1e} to "
              f"{np.max(eps_end):.1e}, a factor of {moved[0]:.1e} over its start (the median layer, geometric mean "
              "over seeds).")

# %% [markdown]
# **3.** Why can no bias turn RMSNorm into LayerNorm on these rows, and why can a trained network with one still
# come out like one with the other?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"A bias adds the same vector to every row, but LayerNorm subtracts each row's own mean, which "
              f"varies from row to row, and divides by the row's standard deviation rather than its RMS: the best "
              f"bias still leaves a relative difference of {resid:.2f}. In a network the layers around the norm train "
              f"too and can absorb much of the difference: trained, LayerNorm minus RMSNorm + bias accuracy was "
              f"{interval(*gap, n=k)}. Weigh it against the task: the five norms ended between "
              f"{min(acc[m].mean() for m in MODELS if m != 'none'):.3f} and "
              f"{max(acc[m].mean() for m in MODELS if m != 'none'):.3f} mean test accuracy and no norm at "
              f"{acc['none'].mean():.3f} (LayerNorm minus no norm {interval(*gap_none, n=k)}): a task on which a "
              "model without a norm does about as well cannot tell close variants apart.")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    "'The Euclidean norm in place of the RMS does not work': " + lesson.result("Euclidean norm") + "; 'RMSNorm "
    "with a bias is close to LayerNorm': " + lesson.result("RMSNorm with a bias") + ".",
    "'RMSNorm does worse on a task that needs centring' (the label is the row mean): "
    + lesson.result("needs the centring") + ".")

# %%
lesson.finish()
