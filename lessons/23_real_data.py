# %% [markdown]
# # Real data, offline: MNIST-1D's baselines, and the norms on scikit-learn's digits.
#
# Every training lesson before this one learns data it drew itself (spirals, Gaussians) or Python's
# docstrings. A verdict on data the lesson drew can be an artefact of the drawing. This lesson trains on two
# data sets nobody here made, both available without a download:
#
# * **MNIST-1D** (Greydanus 2020; `lessons/SOURCES.md`): ten 1-D templates of "digits", padded, translated,
#   sheared, scaled and blurred with noise into signals of 40 samples; 4000 training and 1000 test signals.
#   The `mnist1d` package's `make_dataset` builds them from the templates with the paper's default settings
#   (its own seed, 42), on this machine; its `get_dataset`, which downloads a copy, is never called. The paper
#   reports test accuracies of about 32% for logistic regression and 68% for an MLP: reproducing them checks
#   that the data and the training here are the paper's, before anything is compared on them.
# * **The digits** of scikit-learn (`load_digits`): 1797 real handwritten digits, 8 × 8 images with pixel
#   values 0 to 16, shipped inside the package.
#
# On the digits the lesson then races an MLP without a norm, with BatchNorm, LayerNorm, RMSNorm and pRMSNorm,
# with one layer 512 wide so that pRMSNorm's RMS comes from $k = \lceil 512 \cdot 6.25\% \rceil = 32$
# features, not the 3 or 4 of lessons 10 and 12 (the paper: $k = 64$ at $d = 1024$). Each "matches" is graded
# beside a control that must fail the same bound, or the bound could not tell the norm from its placebo.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import time

import matplotlib.pyplot as plt
import numpy as np
from mnist1d.data import get_dataset_args, make_dataset
from sklearn.datasets import load_digits

from lessons._common import APPROX, COMMON, FAILS, HOLDS, VERDICTS, check, paper, start, work
from lessons._grading import above, below, control, within
from lessons._stats import mean_interval
from lessons._training import (expect, interval, one_blas_thread, paired, pm, race, report, seeds_to_decide,
                               warm_up)
from lessons._training_plots import STYLE, plot_per_seed
from scratchnorm import Linear, PartialRMSNorm, RMSNorm, nn

lesson = start(__name__, "23_real_data")

# %% [markdown]
# ## MNIST-1D, made here
#
# `make_dataset` draws its random transformations from NumPy's global generator, which it seeds itself, so
# the 5000 signals are the same on every machine with the same packages; the first 4000 are the training set.

# %%
t0 = time.perf_counter()
mnist = make_dataset(get_dataset_args())                    # the paper's defaults; no download
xtr, ytr, xte, yte = mnist["x"], mnist["y"], mnist["x_test"], mnist["y_test"]
made = time.perf_counter() - t0
check(xtr.shape == (4000, 40) and xte.shape == (1000, 40) and set(np.unique(ytr)) == set(range(10)),
      f"MNIST-1D has 4000 training and 1000 test signals of length 40, ten classes: {xtr.shape}, {xte.shape}")
report(lesson, f"  MNIST-1D made in {made:.2f} s: {len(xtr)} training, {len(xte)} test signals of {xtr.shape[1]}")

# %% [markdown]
# ## The paper's two baselines
#
# The models of the MNIST-1D repository: logistic regression, one Linear(40, 10); and its MLP, hidden width
# 100, whose second layer is residual,
#
# $$h_1 = \mathrm{ReLU}(W_1 x), \qquad h_2 = h_1 + \mathrm{ReLU}(W_2 h_1), \qquad \text{logits} = W_3 h_2,$$
#
# trained with Adam at learning rate $10^{-2}$ on batches of 100, as the repository trains them. The repository
# trains for 8000 steps; this lesson trains the MLP for half as many, 100 passes over the training set (its test
# accuracy still creeps up, slowly, while it fits the training set ever more closely), and logistic regression,
# which has long stopped improving by then, for 500. The 4000 steps were set while writing the lesson, by
# looking at the MLP's accuracy on seeds 0–4 (at 2000 its interval reached below the band), so those pilot
# seeds grade nothing: the baselines train fresh seeds from 300 on (`lesson.fresh_seeds`; the ledger says which
# seeds chose and which graded). Accuracy is the share of test signals whose largest logit
# is their class, over `--seeds` initializations and batch orders (default 5); the training loop is `race`, in
# `lessons/_training.py`.

# %%
def logistic(seed):
    return nn.Sequential(Linear(40, 10, seed=seed))


def paper_mlp(seed):
    """h1 = relu(W1 x); h2 = h1 + relu(W2 h1); logits = W3 h2 (hidden width 100)."""
    rng = np.random.default_rng(seed)
    return nn.Sequential(Linear(40, 100, seed=rng), nn.ReLU(),
                         nn.Residual(nn.Sequential(Linear(100, 100, seed=rng), nn.ReLU()), None, "pre"),
                         Linear(100, 10, seed=rng))


def accuracy(model, x, y):
    model.eval()                                   # BatchNorm: its running statistics
    return float(np.mean(model.forward(x).argmax(axis=1) == y))


def train(builders, x, y, steps, batch, lr, seed):
    """Every model of ``builders`` {name: seed -> model} trained with Adam on the same batches."""
    rng = np.random.default_rng(2300 + seed)
    batches = [(x[b], y[b]) for b in rng.integers(0, len(x), (steps, batch))]
    models = {name: build(seed) for name, build in builders.items()}
    race({n: (m, nn.Adam(m, lr=lr)) for n, m in models.items()}, batches, lambda m: 0.0, every=steps)
    return models


BASELINES = {"logistic regression": logistic, "MLP": paper_mlp}
PAPER_SAYS = {"logistic regression": 0.32, "MLP": 0.68}
base_steps = {"logistic regression": lesson.pick(100, 500), "MLP": lesson.pick(300, 4000)}
k_base = lesson.seeds                                                     # the baselines: 5 seeds
with one_blas_thread():
    warm_up([b(99) for b in BASELINES.values()], xtr[:100], ytr[:100])
    base_seeds = lesson.fresh_seeds("the MLP baseline's 4000 steps, from 2000 and 4000", chose=range(5), first=300)
    runs = {n: [train({n: b}, xtr, ytr, base_steps[n], 100, 1e-2, seed)[n] for seed in base_seeds]
            for n, b in BASELINES.items()}
base_acc = {n: np.array([accuracy(m, xte, yte) for m in runs[n]]) for n in BASELINES}
base_train = {n: np.array([accuracy(m, xtr, ytr) for m in runs[n]]) for n in BASELINES}
for n in BASELINES:
    report(lesson, f"  {n:<20} test accuracy {pm(base_acc[n])}, training accuracy {pm(base_train[n])} "
                   f"(the paper: about {PAPER_SAYS[n]:.0%})")

# %% [markdown]
# The paper gives single numbers, without a spread. The lesson grades the reproduction on a band of its own:
# within 5 points of the paper's number holds, within 10 approximately; the whole 95% interval over the seeds
# must lie inside.

# %%
for n in BASELINES:
    m = mean_interval(base_acc[n])
    lesson.claim(f"On MNIST-1D, {n} reaches about {PAPER_SAYS[n]:.0%} test accuracy",
                 source=work("mnist1d", "benchmarks"),
                 measured=f"{base_steps[n]} steps of Adam (lr 1e-2, batches of 100): test accuracy "
                          f"{interval(*m, n=k_base)}, training accuracy {pm(base_train[n])} (holds: within "
                          "5 points of the paper's number)",
                 value=m[0], interval=m[1:], **within(PAPER_SAYS[n] - 0.05, PAPER_SAYS[n] + 0.05,
                                                      approx=(PAPER_SAYS[n] - 0.1, PAPER_SAYS[n] + 0.1)),
                 expect=expect(lesson, (HOLDS, APPROX)))    # the MLP's interval ends near 63%: either reading

# %% [markdown]
# ## The digits
#
# `load_digits` as shipped: the 64 pixel values 0 to 16, not rescaled (a normalization layer after the first
# Linear sees whatever scale the data has). 200 images, drawn with a fixed seed, are the training set and the
# other 1597 the test set (the cell after the race checks that the best model stays below 98.5% and the model
# without a norm below the best).
#
# The image count, the step count and the learning rate below are knobs chosen by looking: they were set, on
# seeds 0–4, so that the task stays off its ceiling and the model without a norm falls clearly behind (question
# 2 says why). Those pilot seeds grade nothing: the digits race trains fresh seeds from 200 on
# (`lesson.fresh_seeds`; the ledger says which seeds chose and which graded). An earlier choice, 200 images and
# 100 steps at $3 \cdot 10^{-2}$, had put no norm clearly behind LayerNorm on the pilot seeds; graded on fresh
# seeds 100–104, its control no longer failed the bound: the choice had flattered it. The learning rate was
# chosen again on seeds 0–4, from $10^{-2}$, $3 \cdot 10^{-2}$, $5 \cdot 10^{-2}$, $7 \cdot 10^{-2}$ and
# $10^{-1}$ (and 50 steps or 100 images at $3 \cdot 10^{-2}$), for a margin, and seeds 100–104, which saw
# the first choice graded, play no part in this one. At this rate the seeds disagree more: at 5 seeds every
# comparison below straddled its bound, and the seeds the ledger's forecast asked for fit in the lesson's minute
# (every layer and Adam on the numba backend, the library's default, faster than NumPy's inside a training
# step), so the race trains 20 (`--seeds N` overrides; the baselines above keep 5).
#
# The model: `nn.mlp([64, 512, 64, 10], norm=...)`, [Linear → Norm → ReLU] twice, then a Linear; Adam at
# $5 \cdot 10^{-2}$, batches of 64, 100 steps (32 passes over the training set). pRMSNorm estimates the RMS of
# the 512-wide layer from its first $k = 32$ features; the 64-wide layer keeps RMSNorm, whose $k$ would be 4, so
# that the pRMSNorm row tests $k = 32$ alone. A sixth model is pRMSNorm's placebo: the same layer with
# $k = 1$, an RMS "estimated" from a single feature.

# %%
images, labels = load_digits(return_X_y=True)              # (1797, 64), pixel values 0..16
order = np.random.default_rng(23).permutation(len(labels))
dtr, dte = order[:200], order[200:]
NORMS = ("none", "batchnorm", "layernorm", "rmsnorm", "prmsnorm", "prmsnorm_k1")
WIDE, NARROW, DIGIT_LR = 512, 64, 5e-2
K = int(np.ceil(WIDE * 0.0625))
LABEL = {**{n: STYLE[n][1] for n in NORMS[:-1]}, "prmsnorm": f"pRMSNorm (k = {K})", "prmsnorm_k1": "pRMSNorm (k = 1)"}


def partial_in_wide_layer(p):
    return lambda d: PartialRMSNorm(d, p=p) if d == WIDE else RMSNorm(d)


def digits_mlp(norm):
    partial = {"prmsnorm": partial_in_wide_layer(0.0625), "prmsnorm_k1": partial_in_wide_layer(1 / WIDE)}
    factory = partial[norm] if norm in partial else norm
    return lambda seed: nn.mlp([64, WIDE, NARROW, 10], norm=factory, seed=seed)


digit_steps = lesson.pick(40, 100)
k = lesson.seeds_for(20)                                                  # the digits race: 20 (see below)
builders = {norm: digits_mlp(norm) for norm in NORMS}
t0 = time.perf_counter()
with one_blas_thread():
    warm_up([b(99) for b in builders.values()], images[dtr[:64]], labels[dtr[:64]])
    graded = lesson.fresh_seeds(f"the digits' {len(dtr)} training images, {digit_steps} steps and learning "
                                f"rate {DIGIT_LR:g}",
                                chose=range(5), first=200)
    runs = [train(builders, images[dtr], labels[dtr], digit_steps, 64, DIGIT_LR, seed) for seed in graded]
acc = {n: np.array([accuracy(r[n], images[dte], labels[dte]) for r in runs]) for n in NORMS}
for n in NORMS:
    report(lesson, f"  {LABEL[n]:<22} digits test accuracy {pm(acc[n])} (seeds: "
                   f"{', '.join(f'{a:.3f}' for a in acc[n])})")
per_seed = (time.perf_counter() - t0) / k                                # seconds of one seed's race (and warm-up)
report(lesson, f"  digits: {len(NORMS)} models x {k} seeds in {time.perf_counter() - t0:.1f} s")
best = max(NORMS, key=lambda n: acc[n].mean())
check(next(b for b in builders["prmsnorm_k1"](0).children.values() if isinstance(b, PartialRMSNorm)).k == 1,
      "the placebo's wide layer estimates its RMS from one feature")
if not lesson.quick:
    check(acc[best].mean() < 0.985 and acc[best].mean() - acc["none"].mean() > 0.005,
          f"the digits task is off its ceiling: best {best} {acc[best].mean():.3f} < 0.985, and the model without "
          f"a norm ({acc['none'].mean():.3f}) is below it")

# %% [markdown]
# ## Seeds and intervals
#
# Every comparison is paired, two models on the same seed and the same batches, and graded on the 95% $t$
# interval of the mean difference over the seeds (lesson 10 explains it). The bounds are set by the task:
# "as good as" is at most 1 point lost (holds), at most 2 approximately. An interval reaching past 2 points on
# one side and inside 2 on the other is inconclusive. Such a bound means something only if it can fail: each
# "matches" is graded beside a control measured the same way, paired on the same seeds, which must lose more
# than 2 points for the whole of its interval. When the control passes too, the claim is inconclusive by
# construction (`lessons/_grading.py`, `beside_control`).
#
# First, does the MLP need a norm at all on this data? The worst of BatchNorm, LayerNorm and RMSNorm against
# no norm, seed by seed.

# %%
normed = ("batchnorm", "layernorm", "rmsnorm")
gain = mean_interval([min(acc[n][s] for n in normed) - acc["none"][s] for s in range(k)])
lesson.claim("On the digits an MLP trains better with a normalization than without", source=COMMON,
             measured=f"test accuracy after {digit_steps} steps: no norm {pm(acc['none'])}; "
                      + "; ".join(f"{STYLE[n][1]} {pm(acc[n])}" for n in normed)
                      + f". Paired per seed, the worst norm minus no norm: {interval(*gain, n=k)} (holds: at least "
                      "1 point better)",
             value=gain[0], interval=gain[1:], **above(0.01, approx=0.0), expect=VERDICTS)

# %% [markdown]
# Then the paper's claims: RMSNorm against LayerNorm, with no norm as its control, and pRMSNorm with $k = 32$
# against RMSNorm, with $k = 1$ as its control (a claim that $k = 32$ features suffice says something only if
# one feature does not). The value is the test accuracy lost by switching, paired per seed.

# %%
placebo_of, decide_of = {}, {}                           # each control's verdict; what would decide the claim
for claim, source, norm, ref, placebo in [
        ("RMSNorm matches LayerNorm's test accuracy (digits, an MLP with a 512-wide layer)", paper("abstract, §1"),
         "rmsnorm", "layernorm", "none"),
        (f"pRMSNorm (k = {K} of d = {WIDE}) matches RMSNorm's test accuracy (digits, an MLP)", paper("§1"),
         "prmsnorm", "rmsnorm", "prmsnorm_k1")]:
    short, short_placebo = paired(acc[ref], acc[norm]), paired(acc[ref], acc[placebo])
    lesson.claim(claim, source=source,
                 measured=f"test accuracy {LABEL[norm]} {pm(acc[norm])} vs {LABEL[ref]} {pm(acc[ref])}; paired "
                          f"shortfall {interval(*short, n=k)} (holds: at most 1 point lost); the control, "
                          f"{LABEL[placebo]} {pm(acc[placebo])}: shortfall {interval(*short_placebo, n=k)}",
                 value=short[0], interval=short[1:], **below(0.01, approx=0.02),
                 control=control(f"{LABEL[placebo]} against {LABEL[ref]}", short_placebo[0], short_placebo[1:]),
                 expect=VERDICTS)

    placebo_of[LABEL[ref]] = f"{lesson.claims[-1].control['verdict']} ({interval(*short_placebo)})"
    decide_of[LABEL[ref]] = seeds_to_decide(lesson.claims[-1], k, per_seed)      # "" once decided

# %% [markdown]
# The figure: a few MNIST-1D signals; the two baselines' test accuracy per seed against the paper's numbers
# and the band that grades them; the digits' test accuracy per norm, one dot per seed, a line joining each
# seed's models.

# %%
fig, (ax_sig, ax_base, ax_dig) = plt.subplots(1, 3, figsize=(16, 4.6), constrained_layout=True)
for digit in range(4):
    i = np.flatnonzero(ytr == digit)[0]
    ax_sig.plot(xtr[i] + 3 * digit, color=f"C{digit}")
    ax_sig.text(40.5, 3 * digit, f"class {digit}", va="center", fontsize=9)
ax_sig.set(xlabel="position", yticks=[], xlim=(0, 47), title="MNIST-1D: one training signal of four classes")
for j, n in enumerate(BASELINES):
    p = PAPER_SAYS[n]
    ax_base.fill_between([j - 0.3, j + 0.3], p - 0.05, p + 0.05, color="0.85", label="the band (±5 points)"
                         if j == 0 else None)
    ax_base.hlines(p, j - 0.3, j + 0.3, color="k", label="the paper" if j == 0 else None)
    ax_base.plot(np.full(len(base_acc[n]), j), base_acc[n], "o", color="C3", label="this run, per seed"
                 if j == 0 else None)
ax_base.set(xticks=range(len(BASELINES)), xticklabels=list(BASELINES), ylim=(0, 1), ylabel="test accuracy",
            title=f"MNIST-1D baselines, {base_steps['logistic regression']} and {base_steps['MLP']} steps")
ax_base.legend(loc="upper left")
plot_per_seed(ax_dig, acc, NORMS, [STYLE[n][0] for n in NORMS[:-1]] + ["plum"])     # plum: the placebo
ax_dig.set_xticks(range(len(NORMS)), [LABEL[n] for n in NORMS], rotation=25, ha="right")
ax_dig.set(ylabel="test accuracy", title=f"Digits ({len(dtr)} training images), MLP 64-{WIDE}-{NARROW}-10, "
                                         f"{digit_steps} steps, lr {DIGIT_LR:g}, seeds {graded.start}-{graded.stop - 1}"
           .replace(", seeds", ",\nseeds"))
lesson.save(fig, "accuracy")

# %% [markdown]
# ## Questions
#
# **1.** Compare the MLP's training and test accuracy on MNIST-1D. What does the gap say about comparing
# normalizations on this task by their training loss?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"Training accuracy is {pm(base_train['MLP'])} against a test accuracy of {pm(base_acc['MLP'])}: the "
              "MLP fits the 4000 training signals far better than it classifies new ones, so a lower training loss "
              "would not say which model classifies better; only held-out accuracy does, which is why every claim "
              "here is graded on the test set.")

# %% [markdown]
# **2.** Why does the lesson keep only 200 of the 1797 digits for training, and train at a learning rate a hundred
# times lesson 10's?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"To keep the task off its ceiling, where a norm and no norm would tie: with {len(dtr)} images at lr "
              f"{DIGIT_LR:g} the best model ({LABEL[best]}) reaches {acc[best].mean():.3f} and the model without a "
              f"norm {acc['none'].mean():.3f}, so a bound of 2 points can fail, as the control shows: no norm "
              f"against LayerNorm, {interval(*paired(acc['layernorm'], acc['none']), n=k)}. On an easier task, "
              "where no norm ends within a point of LayerNorm, every 'matches' would hold for no norm too and say "
              "nothing.")

# %% [markdown]
# **3.** pRMSNorm divides all 512 features by an RMS estimated from 32 of them. How large an error in that
# estimate would you expect, and what would it do to the layer's output?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"For features of similar size the relative error of the estimate is about 1/sqrt(2k) = "
              f"{1 / np.sqrt(2 * K):.0%} at k = {K}, against {1 / np.sqrt(8):.0%} at k = 4: the whole output is scaled "
              "by a factor that wobbles by that much from example to example. Here pRMSNorm's test accuracy is "
              f"{pm(acc['prmsnorm'])} against RMSNorm's {pm(acc['rmsnorm'])}, and with k = 1, a factor that wobbles "
              f"by about {1 / np.sqrt(2):.0%}, {pm(acc['prmsnorm_k1'])}. The RMSNorm of the 64-wide layer after "
              "it, and the argmax of the logits, undo much of a per-example scale, which is why the k = 1 control "
              "is needed: a model that does not feel the estimate's error cannot say whether k = 32 is enough.")

# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    "Data made offline is the paper's data only if it gives the paper's numbers, so check that before comparing "
    "anything on it: logistic regression " + lesson.result("logistic regression reaches") + ", the MLP "
    + lesson.result("MLP reaches") + ".",
    f"'As good as' counts only beside a placebo that fails the same bound: on {len(dtr)} digits no norm ends "
    f"{100 * (acc['layernorm'].mean() - acc['none'].mean()):.1f} points below LayerNorm (control: "
    f"{placebo_of['LayerNorm']}), and RMSNorm against LayerNorm: " + lesson.result("RMSNorm matches LayerNorm's")
    + "; the worst norm against none: " + lesson.result("trains better with") + ".",
    "pRMSNorm at k = 32 against RMSNorm: " + lesson.result("matches RMSNorm's") + "; its placebo, k = 1: "
    f"{placebo_of['RMSNorm']}" + ("" if placebo_of["RMSNorm"].startswith(FAILS) else "; a model in which one "
                                  "feature does as well cannot tell a representative k from one feature")
    + "".join(f"; 'matches {ref}' would be decided by {text}" for ref, text in decide_of.items() if text) + ".")

# %%
lesson.finish()
