# %% [markdown]
# # Pre-Norm and Post-Norm: gradients at initialization, and stability against the learning rate.
#
# Where the normalization sits in a residual block (`nn.Residual`), with $F$ the sublayer (attention or
# feed-forward):
#
# | placement | block | |
# |---|---|---|
# | Pre-Norm | $x + F(\mathrm{Norm}(x))$ | the skip path carries $x$ untouched; GPT-2, LLaMA |
# | Post-Norm | $\mathrm{Norm}(x + F(x))$ | every block's output is normalized; the original Transformer |
#
# $x + F(\mathrm{Norm}(x))$ is Pre-Norm: the norm comes before the sublayer, inside the branch. (One
# explainer, 003 in `lessons/SOURCES.md`, swaps the names and calls `x + Sublayer(LayerNorm(x))` Post-Norm;
# the ledger records that.)

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numpy as np

from lessons._common import COMMON, FAILS, HOLDS, VERDICTS, check, explainer, start, ticks_at
from lessons._grading import above, within
from lessons._stats import mean_interval
from lessons._corpus import char_data
from lessons._placement import BATCH, DEEP_LAYERS, NORMS, PLACEMENTS, SWEEP_LAYERS, T, sweep, transformer
from lessons._training import STYLE, gradient_profile, interval, one_blas_thread, report, top_over_bottom, warm_up

lesson = start(__name__, "11_pre_vs_post_norm")

# %% [markdown]
# ## Gradients at initialization
#
# A stack of Transformer blocks ($d = 32$, 2 heads, contexts of 16 characters of Python's docstrings,
# `lessons/_corpus.py`), one forward and backward, and the norm of the gradient of each block's two
# feed-forward weight matrices, block 1 at the input (mean of 3 initializations). The profile's shape is
# summed up by one ratio, the mean gradient norm of the top quarter of the blocks over that of the bottom
# quarter, measured at several depths.

# %%
LINE = {"pre": "-", "post": "--"}
LEFT_PLATEAU = 0.05     # nats below the unigram baseline: a run that got there uses the context
SIGNED = "{:+.3f}"
XIONG = COMMON + " (Xiong et al. 2020, On Layer Normalization in the Transformer Architecture, arXiv 2002.04745)"

data, rng = char_data(), np.random.default_rng(11)
unigram, batch = data.unigram_loss(), data.windows("train", BATCH, T + 1, rng)
depth, depths, seeds = lesson.pick(6, 12), lesson.pick((2, 4), (2, 4, 8, 16)), lesson.pick((0,), (0, 1, 2))
with one_blas_thread():
    warm_up([transformer(data.vocab_size, n, "pre", 1) for n in NORMS], batch[:, :-1], batch[:, 1:])
    profile = lambda n, p, L: gradient_profile(lambda s: transformer(data.vocab_size, n, p, L, s), L,  # noqa: E731
                                               batch, seeds)
    profiles = {(n, p): profile(n, p, depth) for n in NORMS for p in PLACEMENTS}
    ratios = {(n, p): [top_over_bottom(profile(n, p, L)) for L in depths] for n in NORMS for p in PLACEMENTS}
for key, prof in profiles.items():
    check(np.all(np.isfinite(prof)) and np.all(prof > 0), f"{key}: gradients are finite and nonzero")
    report(lesson, f"  {key[1]:>4}-{STYLE[key[0]][1]:<10} FFN gradient norm per block (input -> output): "
                   + " ".join(f"{g:.2f}" for g in prof) + f"; top/bottom quarter for {depths} blocks: "
                   + " ".join(f"{r:.2f}" for r in ratios[key]))

# %% [markdown]
# In Post-Norm the gradient of block $i$ passes through the norms of every block above it, and the profile
# rises toward the output. Xiong et al. (2020, arXiv 2002.04745) prove and plot that for Post-LN, and report
# that Pre-LN's gradient norm stays about the same across layers. Here the Pre-Norm profile is not flat: the
# skip path carries the output's gradient down unchanged and each block adds to the stream, so the lower
# blocks get the larger gradients and the profile falls toward the output. The ledger grades both statements
# of Xiong et al. on this model, and the naming of explainer 003. RMSNorm gives the same profiles as
# LayerNorm.

# %%
pre, post = top_over_bottom(profiles["layernorm", "pre"]), top_over_bottom(profiles["layernorm", "post"])
lesson.claim("x = x + Sublayer(LayerNorm(x)) is Post-Norm (and x = x + LayerNorm(Sublayer(x)) is Pre-Norm)",
             source=explainer("003", "Transformer 中的归一化位置"),
             measured=f"by definition x + F(Norm(x)) is Pre-Norm and Norm(x + F(x)) Post-Norm (the original "
                      f"Transformer). Measured at init, {depth} blocks: the top quarter's FFN gradient over the "
                      f"bottom quarter's is {pre:.2f} with x + F(LN(x)) (the value; Post-LN's profile rises, "
                      f"> 1) and {post:.2f} with LN(x + F(x))",
             value=pre, **above(1.0), expect=FAILS)
lesson.claim("At initialization Post-LN's gradient norm grows toward the output layer", source=XIONG,
             measured=f"{depth} blocks, top quarter / bottom quarter of the FFN gradient norms: {post:.2f} "
                      "(holds: at least 1.2)",
             value=post, **above(1.2, approx=1.0), expect=HOLDS)
lesson.claim("At initialization Pre-LN's gradient norm is about the same in every layer", source=XIONG,
             measured=f"{depth} blocks, top quarter / bottom quarter: {pre:.2f} (holds within a factor 1.5)",
             value=pre, **within(1 / 1.5, 1.5, approx=(0.5, 2.0)), expect=VERDICTS)

# %% [markdown]
# The figure: on the left the gradient norm per block at initialization; on the right the ratio of the top
# blocks' gradient to the bottom blocks' against depth.

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8), constrained_layout=True)
for (norm, placement), prof in profiles.items():
    name = "x + F(Norm(x))" if placement == "pre" else "Norm(x + F(x))"
    ax1.plot(np.arange(1, len(prof) + 1), prof, LINE[placement], marker="o", ms=3, color=STYLE[norm][0],
             label=f"{placement}-norm {name}, {STYLE[norm][1]}")
    ax2.plot(depths, ratios[norm, placement], LINE[placement], marker="o", color=STYLE[norm][0],
             label=f"{placement}-norm, {STYLE[norm][1]}")
ax1.set(yscale="log", xlabel="block (1 = next to the input)", ylabel="‖gradient‖ of the block's parameters",
        title=f"At initialization, {len(next(iter(profiles.values())))} blocks (mean of initializations)")
ax1.legend(fontsize=8)
ax2.axhline(1, color="k", lw=0.8)
ax2.set(xscale="log", yscale="log", xlabel="number of blocks", ylabel="top quarter / bottom quarter",
        title="How uneven the profile gets with depth")
ticks_at(ax2, depths)
for ax, values in ((ax1, list(profiles.values())), (ax2, list(ratios.values()))):
    lo, hi = min(np.min(v) for v in values), max(np.max(v) for v in values)
    ticks = [t for t in (0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1, 1.5, 2, 3, 5, 10) if lo / 1.15 <= t <= hi * 1.15]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
ax2.legend(fontsize=8)
fig.suptitle("Gradient per block: Pre-Norm gives the lower blocks more, Post-Norm the upper blocks")
lesson.save(fig, "gradients")

# %% [markdown]
# ## Stability against the learning rate
#
# Short runs (80 steps, all on the same batches) of a 4-block model at three learning rates of Adam without
# warm-up, Post-Norm also with a linear warm-up over the first 30% of the steps at the middle rate, and an
# 8-block model of each placement at the smallest rate, repeated for every seed (`--seeds N`, default 3).
# These are short runs of small models, and a learning-rate sweep of three points is a coarse measure of
# stability.

# %%
with one_blas_thread():
    sweeps = [sweep(lesson, data, np.random.default_rng(110 + seed), seed) for seed in range(lesson.seeds)]
    lrs, final = sweeps[0][0], [f for _, f in sweeps]              # final: one {key: loss} per seed
for (norm, placement, layers, lr, warmup) in final[0]:
    report(lesson, f"  sweep {placement:>4}-{STYLE[norm][1]:<10} {layers:2d} blocks, lr {lr:<6g} "
                   f"{'warm-up' if warmup else 'no warm-up':<10} final validation loss per seed "
                   + ", ".join(f"{f[norm, placement, layers, lr, warmup]:.3f}" for f in final)
                   + f" (unigram {unigram:.3f})")

# %% [markdown]
# The measure is the validation loss at the end against the unigram baseline, the loss of predicting every
# character by its frequency in the training text, $-\frac{1}{n}\sum_t \ln p(c_t)$. A model that ignores the
# context sits on that plateau, so a run that ends on it (less than 0.05 nats below it) has stalled. Each
# comparison is paired (Pre-Norm and Post-Norm on the same seed, data and rate) and graded on the end of its
# 95% interval nearest the bound, so a verdict of "holds" needs every seed to agree well enough. `--quick`
# runs too briefly to compare: its verdicts are recorded, not expected.

# %%
def below(norm, placement, lr, warmup=False, layers=SWEEP_LAYERS):
    """Per seed, how far the run ends below the unigram baseline, in nats (0 or less: stalled)."""
    return np.array([unigram - f[norm, placement, layers, lr, warmup] for f in final])


k, mid, deep = len(final), lrs[len(lrs) // 2], DEEP_LAYERS
pre_gain = mean_interval(np.concatenate([below(n, "pre", mid) - below(n, "post", mid) for n in NORMS]))
lesson.claim("Pre-Norm is more stable than Post-Norm: it keeps learning at larger learning rates",
             source=explainer("001", "§6"),
             measured=f"{SWEEP_LAYERS}-block Transformers, Adam without warm-up, nats below the unigram baseline "
                      "at the end, pre / post (mean over seeds): "
                      + "; ".join(f"{STYLE[n][1]} lr {lr:g}: {below(n, 'pre', lr).mean():.2f} / "
                                  f"{below(n, 'post', lr).mean():.2f}" for n in NORMS for lr in lrs)
                      + f". At lr {mid:g}, pre minus post, paired per seed and norm: "
                      f"{interval(*pre_gain, n=k)}; value: the interval's lower end (holds: at least "
                      f"{LEFT_PLATEAU} nats, the plateau's width)",
             value=pre_gain[1], **above(LEFT_PLATEAU, approx=0.0), expect=VERDICTS)

gap = mean_interval(below("layernorm", "pre", lrs[0], layers=deep) - below("layernorm", "post", lrs[0],
                                                                             layers=deep))
lesson.claim("Pre-Norm trains deeper models than Post-Norm", source=explainer("001", "§6"),
             measured=f"LayerNorm, Adam lr {lrs[0]:g} without warm-up, nats below the unigram baseline at the "
                      f"end, pre / post (mean over seeds): {SWEEP_LAYERS} blocks "
                      f"{below('layernorm', 'pre', lrs[0]).mean():.2f} / "
                      f"{below('layernorm', 'post', lrs[0]).mean():.2f}; {deep} blocks "
                      f"{below('layernorm', 'pre', lrs[0], layers=deep).mean():.2f} / "
                      f"{below('layernorm', 'post', lrs[0], layers=deep).mean():.2f}; at {deep} blocks pre minus "
                      f"post, paired: {interval(*gap, n=k)}; value: the interval's lower end",
             value=gap[1], **above(LEFT_PLATEAU, approx=0.0), expect=VERDICTS)

# %% [markdown]
# One explainer also says RMSNorm's advantage over LayerNorm shows more in Pre-Norm: the difference of the
# final losses, LayerNorm minus RMSNorm, averaged over the learning rates, is compared between the two
# placements, seed by seed.

# %%
def advantage(placement):
    """Per seed, mean over the learning rates of LayerNorm's final loss minus RMSNorm's (> 0: RMSNorm better)."""
    return np.mean([below("rmsnorm", placement, lr) - below("layernorm", placement, lr) for lr in lrs], axis=0)


more = mean_interval(advantage("pre") - advantage("post"))
warm = below("rmsnorm", "post", lrs[1], True) - below("layernorm", "post", lrs[1], True)
lesson.claim("RMSNorm's advantage over LayerNorm shows more in Pre-Norm", source=explainer("001", "§6"),
             measured=f"final validation loss, LayerNorm minus RMSNorm, mean over the learning rates without "
                      f"warm-up: Pre-Norm {advantage('pre').mean():+.3f}, Post-Norm "
                      f"{advantage('post').mean():+.3f} nats; Pre minus Post, paired per seed: "
                      f"{interval(*more, SIGNED, k)}; value: the "
                      f"interval's lower end (holds: at least 0.03 nats). Post-Norm with warm-up at lr {lrs[1]:g}: "
                      f"{warm.mean():+.3f}",
             value=more[1], **above(0.03, approx=0.0), expect=VERDICTS)

# %% [markdown]
# The figure: the final validation loss (mean over seeds) against the learning rate, with and without
# warm-up, for LayerNorm and RMSNorm; the grey band is the plateau where a run has stalled.

# %%
mean_final = {key: float(np.mean([f[key] for f in final])) for key in final[0]}
fig, axes = plt.subplots(1, len(NORMS), figsize=(13, 5.4), layout="constrained", sharey=True)
for ax, norm in zip(axes, NORMS):
    for placement, warmup in (("pre", False), ("post", False), ("post", True)):
        xs = [lr for lr in lrs if (norm, placement, SWEEP_LAYERS, lr, warmup) in mean_final]
        ax.plot(xs, [mean_final[norm, placement, SWEEP_LAYERS, lr, warmup] for lr in xs], LINE[placement],
                marker="s" if warmup else "o", color="k" if warmup else STYLE[norm][0],
                label=f"{placement}-norm, {'with' if warmup else 'no'} warm-up")
    if norm == "layernorm":
        for placement, marker in (("pre", "*"), ("post", "X")):
            ax.plot(lrs[0], mean_final[norm, placement, deep, lrs[0], False], marker, ms=11, color="tab:red",
                    label=f"{placement}-norm, {deep} blocks, no warm-up")
    ax.axhspan(unigram - LEFT_PLATEAU, max(mean_final.values()) + 0.02, color="0.92", zorder=0,
               label=f"stalled: less than {LEFT_PLATEAU} nats below the baseline")
    ax.axhline(unigram, color="k", lw=0.8, ls=":")
    ax.annotate("unigram baseline: the plateau\nof a model that ignores the context", xy=(lrs[0], unigram),
                xytext=(0.02, 0.97), textcoords="axes fraction", fontsize=8, va="top",
                arrowprops=dict(arrowstyle="-", color="0.5", lw=0.6))
    ax.set(xscale="log", xlabel="Adam learning rate", title=f"{STYLE[norm][1]}, {SWEEP_LAYERS} blocks")
    ticks_at(ax, lrs)
axes[0].set_ylabel("validation loss at the end (nats)")
fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=3, fontsize=9)
fig.suptitle(f"Short runs on the same batches (mean of {k} seed{'s' * (k > 1)}): where training "
             "stalls on the plateau")
lesson.save(fig, "stability")

# %% [markdown]
# ## Questions
#
# **1.** At initialization, why does Post-Norm's gradient profile rise toward the output while Pre-Norm's
# falls?

# %% tags=["remove-input"]
lesson.answer(f"In Post-Norm a lower block's gradient reaches it only through the norm of every block above it; in "
              f"Pre-Norm the skip path carries the output's gradient down unchanged and every block adds its share on "
              f"the way. The top quarter's gradient over the bottom quarter's, {depth} blocks: Post-LN {post:.2f}, "
              f"Pre-LN {pre:.2f}.")

# %% [markdown]
# **2.** Why is the unigram baseline the yardstick of the sweep?

# %% tags=["remove-input"]
end = [mean_final["layernorm", p, SWEEP_LAYERS, mid, False] for p in PLACEMENTS]
lesson.answer(f"It is the loss of a model that ignores the context, {unigram:.3f} nats: a run that ends on it has "
              f"stalled. At lr {mid:g} the {SWEEP_LAYERS}-block LayerNorm models end at {end[0]:.3f} (Pre-Norm) and "
              f"{end[1]:.3f} (Post-Norm) nats, mean over seeds.")

# %% [markdown]
# **3.** Explainer 003 calls $x + F(\mathrm{LayerNorm}(x))$ Post-Norm. What in this run tells the two
# placements apart, whatever their names?

# %% tags=["remove-input"]
lesson.answer(f"Their gradients at initialization: x + F(LN(x)) gives the top quarter of {depth} blocks {pre:.2f} "
              f"times the bottom quarter's gradient, falling toward the output, and LN(x + F(x)) {post:.2f}, rising as "
              "Post-LN's does; so the explainer's 'Post-Norm' behaves as Pre-Norm, the name the definition gives it.")

# %%
lesson.finish()
