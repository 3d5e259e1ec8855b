# %% [markdown]
# # Where the norm goes: Pre, Post, Peri, reordered and DeepNorm, with and without QK-Norm.
#
# Lesson 11 compared Pre-Norm and Post-Norm. Today's models use three more placements
# (`nn.Residual(f, norm, placement=...)`, the derivations in `scratchnorm/nn/residual.py`):
#
# | `placement=` | the block | used by |
# |---|---|---|
# | `pre` | $x + F(\mathrm{Norm}(x))$ | GPT-2, LLaMA |
# | `post` | $\mathrm{Norm}(x + F(x))$ | the original Transformer |
# | `peri` | $x + \mathrm{Norm}_{\mathrm{out}}(F(\mathrm{Norm}(x)))$ | Gemma 2 and 3 ("sandwich"; Peri-LN) |
# | `reordered` | $x + \mathrm{Norm}(F(x))$ | OLMo 2 |
# | `deepnorm` | $\mathrm{Norm}(\alpha x + F(x))$ | DeepNet |
#
# DeepNorm's $\alpha = (2L)^{1/4}$, and $F$'s initial weights are scaled by $(8L)^{-1/4}$, for $L$ blocks.
# QK-Norm (`qk_norm="rmsnorm"`; Qwen3, Gemma 3, OLMo 2) normalizes each head's queries and keys before their
# dot products, so that a score is bounded by the norms' weights whatever the size the projections grow to.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numpy as np

from lessons._common import COMMON, HOLDS, VERDICTS, check, start, ticks_at, work
from lessons._corpus import char_data
from lessons._grading import above, below, nearest_end
from lessons._placement import ALL_PLACEMENTS, D, HEADS, T, max_logit, placement_race, stream_variances
from lessons._stats import mean_interval
from lessons._training import expect, gradient_profile, interval, one_blas_thread, report, top_over_bottom
from scratchnorm import nn

lesson = start(__name__, "20_where_the_norm_goes")

# %% [markdown]
# ## The setup
#
# Everything is measured on the tiny Transformer of lesson 11 (RMSNorm, $d = 32$, 2 heads, contexts of 16
# characters), each for every seed (`--seeds`, default 3). The runs are short and the models small: the
# ledger records what they show, and the verdicts that the text below does not announce are recorded, not
# expected.

# %%
LRS, SWEEP, DEEP, STEPS = (1e-2, 3e-2), 4, 8, 60
DEEPNET = f"{COMMON} (Wang et al. 2022, DeepNet: Scaling Transformers to 1,000 Layers, arXiv 2203.00555)"
QKNORM = f"{COMMON} (Dehghani et al. 2023, ViT-22B; adopted by Qwen3, Gemma 3 and OLMo 2)"


def max_logit_after(model, val):
    model.forward(val[:32, :-1])
    return max_logit(model)


data = char_data()
unigram, steps = data.unigram_loss(), lesson.pick(30, STEPS)
batch = data.windows("train", 16, T + 1, np.random.default_rng(20))

# %% [markdown]
# ## Gradient norms at initialization
#
# For every placement, 8-block models at initialization (three of them): the gradient norm of the two
# feed-forward weights of each block, after one forward and backward on a batch.

# %%
with one_blas_thread():
    grads = {p: gradient_profile(lambda s, p=p: nn.Transformer(data.vocab_size, D, HEADS, DEEP, T, norm="rmsnorm",
                                                               placement=p, seed=s), DEEP, batch, (0, 1, 2))
             for p in ALL_PLACEMENTS}

# %% [markdown]
# ## The training runs
#
# Three races, each on the same batches per seed, Adam without warm-up:
#
# * stability: 4-block models of every placement at two learning rates, the validation loss at the end
#   against the unigram baseline (a run that ends on it has not used the context: lesson 11 explains the
#   measure);
# * depth: 8-block models, Pre and Peri, at the lower rate, for the hidden states;
# * attention logits: 4-block Pre-Norm models with and without QK-Norm, at the higher rate.
#
# The cell prints, per placement and rate, the nats below the unigram baseline per seed.

# %%
with one_blas_thread():
    seeds = range(lesson.seeds)
    sweep = [{lr: placement_race(data, [(p, None) for p in ALL_PLACEMENTS], steps, lr, s, SWEEP) for lr in LRS}
             for s in seeds]
    deep = [placement_race(data, [("pre", None), ("peri", None)], steps, LRS[0], s, DEEP)[0] for s in seeds]
    qk = [placement_race(data, [("pre", None), ("pre", "rmsnorm")], steps, LRS[1], s, SWEEP) for s in seeds]
below_unigram = {(p, lr): np.array([unigram - sw[lr][0][p, None][1].loss[-1] for sw in sweep])
                 for p in ALL_PLACEMENTS for lr in LRS}
for key, v in below_unigram.items():
    check(np.all(np.isfinite(v)), f"{key}: finite losses")
    report(lesson, f"  {key[0]:>9} lr {key[1]:g}: nats below the unigram baseline per seed "
                   + ", ".join(f"{b:+.3f}" for b in v))

# %% [markdown]
# ## The hidden states
#
# The variance of the residual stream after each of the 8 blocks, Pre and Peri, after the short training.
# The Peri-LN paper's claim: Pre-LN's grows fast, up to exponentially, Peri-LN's about linearly, because
# Peri-LN normalizes what each block adds. Exponential growth multiplies the variance by the same factor
# every block; the second claim compares the factor per block over the second half of the blocks with the
# first half's.

# %%
variances = {p: np.array([stream_variances(d[p, None][0], batch[:, :-1]) for d in deep]) for p in ("pre", "peri")}
last = {p: np.exp(np.mean(np.log(v[:, -1]))) for p, v in variances.items()}      # geometric mean over seeds
lesson.claim("Peri-LN keeps the hidden states' variance from growing with depth as Pre-LN's does",
             source=work("periln", "variance growth"),
             measured=f"{DEEP} blocks, lr {LRS[0]:g}, variance of the residual stream after each block (mean "
                      "over seeds), Pre: " + ", ".join(f"{v:.3g}" for v in variances["pre"].mean(0)[1:])
                      + "; Peri: " + ", ".join(f"{v:.3g}" for v in variances["peri"].mean(0)[1:])
                      + f"; value: last block, Pre over Peri ({last['pre'] / last['peri']:.2f}; holds from 2)",
             value=last["pre"] / last["peri"], **above(2.0, approx=1.2), expect=expect(lesson, HOLDS))
pre = variances["pre"].mean(0)[1:]                                                # blocks 1..DEEP
half = DEEP // 2
per_block = [(pre[half - 1] / pre[0]) ** (1 / (half - 1)), (pre[-1] / pre[half - 1]) ** (1 / (DEEP - half))]
lesson.claim("Pre-LN's hidden-state variance grows exponentially with depth",
             source=work("periln", "variance growth"),
             measured=f"{DEEP} blocks, the Pre-LN stream's variance grows by {per_block[0]:.2f}x a block over "
                      f"blocks 1-{half} and {per_block[1]:.2f}x over blocks {half}-{DEEP}; value: the second "
                      "factor over the first (1 for an exponential, below 1 for slower growth; holds from 0.9)",
             value=per_block[1] / per_block[0], **above(0.9, approx=0.75), expect=VERDICTS)

# %% [markdown]
# The gradient norms at initialization, graded: the top quarter's feed-forward gradient norm over the bottom
# quarter's, for each placement; the more even, the closer to 1, so the claim compares $|\log|$ of that
# ratio for Peri with Pre's.

# %%
spread = {p: abs(np.log(top_over_bottom(g))) for p, g in grads.items()}
lesson.claim("Peri-LN's gradient norms are more even across layers than Pre-LN's",
             source=work("periln", "gradient norms"),
             measured=f"at initialization, {DEEP} blocks, top quarter's FFN gradient norm over the bottom "
                      "quarter's: " + ", ".join(f"{p} {top_over_bottom(g):.2f}" for p, g in grads.items())
                      + f"; value: |log| of Peri's over |log| of Pre's ({spread['peri'] / spread['pre']:.2f}; "
                      "holds at most 0.67)",
             value=spread["peri"] / spread["pre"], **below(0.67, approx=1.0), expect=VERDICTS)

# %% [markdown]
# The figure: the variance of the residual stream per block (Pre and Peri, 8 blocks; and all five placements
# at 4 blocks), and the gradient norm per block at initialization.

# %%
fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
for p, ls in (("pre", "-"), ("peri", "--")):
    axes[0].semilogy(range(DEEP + 1), variances[p].mean(0), "o" + ls, label=f"{p}, {DEEP} blocks")
for p in ALL_PLACEMENTS:
    v = np.mean([stream_variances(sw[LRS[0]][0][p, None][0], sw[LRS[0]][1][:32, :-1]) for sw in sweep], axis=0)
    axes[1].semilogy(range(SWEEP + 1), v, "o-", label=p)
    axes[2].plot(range(1, DEEP + 1), grads[p], "o-", label=p)
axes[0].set(xlabel="block (0: the embedding)", ylabel="variance of the residual stream",
            title=f"after {steps} steps at lr {LRS[0]:g}")
axes[1].set(xlabel="block (0: the embedding)", ylabel="variance of the residual stream",
            title=f"{SWEEP} blocks, every placement, lr {LRS[0]:g}")
axes[2].set(xlabel="block (1: at the input)", ylabel="FFN gradient norm (mean of 3 inits)",
            title="gradient norms at initialization", yscale="log")
for ax in axes:
    ax.legend(fontsize=8)
lesson.save(fig, "depth")

# %% [markdown]
# ## Attention logits
#
# The largest $|\text{score}|$ over every block, head and pair of positions, after the short training at the
# high rate, Pre-Norm with and without QK-Norm.

# %%
logits = {q: np.array([max_logit_after(run_[0][("pre", q)][0], run_[1]) for run_ in qk]) for q in (None, "rmsnorm")}
ratio = np.exp(np.mean(np.log(logits[None] / logits["rmsnorm"])))
lesson.claim("QK-Norm keeps attention logits from growing in training", source=QKNORM,
             measured=f"Pre-Norm, {SWEEP} blocks, lr {LRS[1]:g}, the largest |attention score| at the end, per "
                      f"seed: without QK-Norm " + ", ".join(f"{v:.1f}" for v in logits[None])
                      + "; with " + ", ".join(f"{v:.1f}" for v in logits["rmsnorm"])
                      + f"; value: without over with, geometric mean ({ratio:.1f}; holds from 3)",
             value=ratio, **above(3.0, approx=1.5), expect=expect(lesson, HOLDS))

# %% [markdown]
# ## Stability
#
# From the stability race: DeepNorm against Post-Norm at the lower rate, and Peri against Pre at the higher
# one, in nats below the unigram baseline, paired per seed.

# %%
gain = mean_interval(below_unigram["deepnorm", LRS[0]] - below_unigram["post", LRS[0]])
bounds = above(0.05, approx=0.0)
lesson.claim("DeepNorm (up-weighted skip, down-scaled initialization) trains where Post-Norm stalls",
             source=DEEPNET,
             measured=f"{SWEEP} blocks, lr {LRS[0]:g}, nats below the unigram baseline, DeepNorm minus Post-Norm, "
                      f"paired: {interval(*gain, n=len(below_unigram['post', LRS[0]]))}; value: the interval's "
                      "lower end (holds from 0.05 nats)",
             value=nearest_end(gain[1:], bounds["holds_if"]), **bounds, expect=VERDICTS)
peri = mean_interval(below_unigram["peri", LRS[1]] - below_unigram["pre", LRS[1]])
lesson.claim("Peri-LN is at least as stable as Pre-LN at a high learning rate", source=work("periln", "abstract"),
             measured=f"{SWEEP} blocks, lr {LRS[1]:g}, nats below the unigram baseline, Peri minus Pre, paired: "
                      f"{interval(*peri, n=len(below_unigram['pre', LRS[1]]))}; value: the interval's lower end "
                      "(holds from -0.02)",
             value=peri[1], **above(-0.02, approx=-0.1), expect=VERDICTS)

# %% [markdown]
# The figure: the largest attention logit with and without QK-Norm; and the nats below the unigram baseline
# at the end against the learning rate, per placement (higher is better).

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
axes[0].bar(["without QK-Norm", "with QK-Norm (RMSNorm)"], [logits[None].mean(), logits["rmsnorm"].mean()],
            color=["tab:red", "tab:blue"])
axes[0].set(ylabel="largest |attention score| (mean over seeds)", yscale="log",
            title=f"Pre-Norm, {SWEEP} blocks, lr {LRS[1]:g}")
for p in ALL_PLACEMENTS:
    axes[1].plot(LRS, [below_unigram[p, lr].mean() for lr in LRS], "o-", label=p)
axes[1].axhline(0, color="0.5", lw=1, ls=":", label="the unigram baseline")
axes[1].set(xscale="log", xlabel="learning rate (Adam, no warm-up)", ylabel="nats below the unigram baseline",
            title=f"{SWEEP} blocks, {steps} steps: higher is better")
ticks_at(axes[1], LRS)
axes[1].legend(fontsize=8)
lesson.save(fig, "training")

# %% [markdown]
# ## Questions
#
# **1.** Why should normalizing what each block adds (Peri-LN) slow the growth of the residual stream's
# variance, compared with Pre-LN?

# %% tags=["remove-input"]
lesson.answer(f"The stream is the embedding plus what the blocks add. Pre-LN adds F(Norm(x)) unnormalized, and its "
              f"size can grow in training; Peri-LN passes it through Norm_out first, so each addition has a size set "
              f"by that norm's weights. After {DEEP} blocks the variance was {last['pre']:.3g} for Pre, "
              f"{last['peri']:.3g} for Peri (geometric means over seeds).")

# %% [markdown]
# **2.** What would exponential growth of Pre-LN's variance look like in the per-block factors, and what did
# this run show?

# %% tags=["remove-input"]
lesson.answer(f"An exponential multiplies the variance by the same factor every block, so the factor over blocks "
              f"{half}-{DEEP} would equal that over blocks 1-{half}. Here they were {per_block[1]:.2f}x and "
              f"{per_block[0]:.2f}x a block, a ratio of {per_block[1] / per_block[0]:.2f}: "
              + ("the growth slowed with depth." if per_block[1] / per_block[0] < 0.9 else "close to exponential."))

# %% [markdown]
# **3.** Why does normalizing the queries and keys bound the attention scores, whatever the projections
# learn?

# %% tags=["remove-input"]
lesson.answer(f"A score is q . k times a fixed scale, and |q . k| <= |q| |k|. After RMSNorm each of q and k has a "
              f"length fixed by the head size and the norm's weights, however large the projections grow; without "
              f"it the scores grow with them. Largest score: {logits[None].mean():.1f} without, "
              f"{logits['rmsnorm'].mean():.1f} with QK-Norm (geometric-mean ratio {ratio:.1f}).")

# %%
lesson.finish()
