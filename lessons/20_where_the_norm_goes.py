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
# QK-Norm (`qk_norm="rmsnorm"`) normalizes queries and keys before their dot products (question 3 asks
# what that does to the attention scores). Qwen3 and Gemma 3 normalize each
# head's query and key (the default, `qk_norm_over="head"`; this lesson's); OLMo 2 normalizes the query and
# key of all heads at once, one RMSNorm over $H \cdot d_h$ features (`qk_norm_over="all_heads"`).

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import time

import numpy as np

from lessons._common import COMMON, HOLDS, VERDICTS, check, start, work
from lessons._corpus import char_data
from lessons._grading import above, below, control
from lessons._placement_plots import plot_depth, plot_logits_and_sweep
from lessons._stats import mean_interval, geometric_interval
from lessons._training import expect, interval, one_blas_thread, report, seeds_to_decide, train_step
from scratchnorm import nn

lesson = start(__name__, "20_where_the_norm_goes")

# %% [markdown]
# ## The setup
#
# Everything is measured on the tiny Transformer of lesson 11 (RMSNorm, $d = 32$, 2 heads, contexts of 16
# characters of Python's docstrings), each for every seed (`--seeds`, default 5: seed $s$ initializes the
# models with `seed=s`). The runs are short and the models small: the
# ledger records what they show, and the verdicts that the text below does not announce are recorded, not
# expected. Comparisons over seeds are paired and graded on their whole 95% interval ("inconclusive" when it
# straddles a bound).
#
# The models train on the library's default backend, numba's kernels, measured faster than NumPy's in this
# lesson's training step (lessons/NOTES.md). Most of a step is float64 matrix products, already at the core's
# speed, and the exponentials of GELU, softmax and the loss, so no backend buys the many more seeds some rows
# would need (the takeaways compute how many, and the minutes).

# %%
PLACEMENTS = ("pre", "post", "peri", "reordered", "deepnorm")
RACED = ("pre", "post", "peri", "deepnorm")     # trained: reordered is measured at initialization only
D, HEADS, T, BETAS = 32, 2, 16, (0.9, 0.99)
LRS, SWEEP, DEEP, STEPS = (3e-3, 1e-2, 3e-2), 4, 8, 60
DEEP_LR, QK_LR, PLATEAU = 1e-2, 3e-2, 0.05      # PLATEAU: nats below the unigram baseline, as in lesson 11
DEEPNET = f"{COMMON} (Wang et al. 2022, DeepNet: Scaling Transformers to 1,000 Layers, arXiv 2203.00555)"
QKNORM = f"{COMMON} (Dehghani et al. 2023, ViT-22B; adopted by Qwen3, Gemma 3 and OLMo 2)"


INITS, FIRST_INIT = 40, 100    # initializations at init, fresh: 0-4 chose the count (the ledger's forecast)
NO_NORM = "none"        # the placebo: the same Transformer with no norm anywhere (Pre-Norm's wiring, empty)


def transformer(placement, layers, seed, qk_norm=None):
    """The lesson's Transformer with RMSNorm at ``placement``, or with no norm at all (``NO_NORM``)."""
    if placement == NO_NORM:
        return nn.Transformer(data.vocab_size, D, HEADS, layers, T, norm=None, placement="pre", seed=seed)
    return nn.Transformer(data.vocab_size, D, HEADS, layers, T, norm="rmsnorm", placement=placement,
                          qk_norm=qk_norm, seed=seed)


data = char_data()
unigram, steps = data.unigram_loss(), lesson.pick(30, STEPS)
LRS = lesson.pick(LRS[1:], LRS)
batch = data.windows("train", 16, T + 1, np.random.default_rng(20))

# %% [markdown]
# ## Gradient norms at initialization
#
# For every placement, 8-block models at initialization: the gradient norm of the two feed-forward weights of each
# block, $\sqrt{\lVert \partial L/\partial W_1\rVert^2 + \lVert \partial L/\partial W_2\rVert^2}$, after one
# forward and backward of the next-character loss on a batch of 16 windows (the measure of lesson 27, which grades
# the profiles of Pre-Norm and Post-Norm). Nothing is trained, so initializations are cheap and get a count of
# their own, `INITS` = 40, apart from the training seeds: at 5 (initializations 0–4) the graded row below was
# inconclusive and the ledger's forecast asked for 6.8 times as many, 34. Those 5 chose the count, so the graded
# initializations are fresh, from 100 on (as in lesson 27; the ledger records which chose and which graded).

# %%
def ffn_gradients(model, windows):
    """Per block (input first), the norm of the gradient of its two feed-forward weight matrices."""
    ce = nn.SoftmaxCrossEntropy()
    ce.forward(model.forward(windows[:, :-1]), windows[:, 1:])
    model.backward(ce.backward())
    return np.array([np.sqrt(sum(np.sum(np.square(model.grads[f"blocks.{i}.mlp.f.{j}.weight"])) for j in (0, 2)))
                     for i in range(model.n_layers)])


inits = range(FIRST_INIT, FIRST_INIT + lesson.pick(lesson.seeds, INITS))
lesson.seed_roles.append({"knob": f"the initializations at init, {INITS} (from the ledger's forecast on 5)",
                          "chose": [0, 4], "graded": [inits.start, inits.stop - 1]})
with one_blas_thread():
    t0 = time.perf_counter()
    per_init = {p: [ffn_gradients(transformer(p, DEEP, s), batch) for s in inits] for p in PLACEMENTS}
    per_init_seconds = (time.perf_counter() - t0) / len(inits)          # all five placements, one initialization
grads = {p: np.mean(g, axis=0) for p, g in per_init.items()}

# %% [markdown]
# ## The training runs
#
# Three races of 60 steps each, on the same batches per seed, Adam without warm-up:
#
# * short runs: 4-block models of every placement but `reordered` at three learning rates, and the same model
#   with no norm at all, the validation loss at the end against the unigram baseline (a run that ends on it has
#   not used the context: lesson 11 explains the measure);
# * depth: 8-block models, Pre and Peri, at lr $10^{-2}$, for the hidden states;
# * attention logits: 4-block Pre-Norm models with and without QK-Norm, at lr $3 \cdot 10^{-2}$. The model
#   without QK-Norm is the short runs' Pre-Norm model at that rate (the same model, batches and rate), trained once.
#
# Seed $s$ draws the batches (16 windows each) from `default_rng(200 + s)`. Only the end of a run is read, so
# a short run is evaluated once, after its last step, on the same 128 validation windows; the other two races
# read the trained models, not their loss. The cell prints, per placement and rate, the nats below the unigram
# baseline per seed.
#
# Two cuts keep the lesson in its 60 s budget, both set from the time of a step, before any run with them was
# seen: 60 steps a run (80 before; lessons/NOTES.md has the timings), and no training runs of
# `reordered`, which no row read (it stays in the figure at initialization). A row that turns on the length of
# a run says "short run" in its wording: 60 steps is one point of that curve.

# %%
def placement_race(keys, lr, seed, layers, evaluate=True):
    """Models of each key (placement, qk_norm) trained on the same batches: ({key: model}, {key: validation
    loss after the last step}, or {} when not ``evaluate``)."""
    rng, ce = np.random.default_rng(200 + seed), nn.SoftmaxCrossEntropy()
    batches = [(w[:, :-1], w[:, 1:]) for w in (data.windows("train", 16, T + 1, rng) for _ in range(steps))]
    models = {key: transformer(key[0], layers, seed, qk_norm=key[1]) for key in keys}
    final = {}
    for key, model in models.items():
        opt = nn.Adam(model, lr=lr, betas=BETAS)
        for x, target in batches:
            train_step(model, ce, opt, x, target)
        if evaluate:
            final[key] = float(ce.forward(model.eval().forward(val[:, :-1]), val[:, 1:]))
            model.train()
        model.forward(val[:1, :-1])        # a layer keeps its last forward's cache: shrink it to one window
    return models, final                   # (this lesson keeps about a hundred models; gigabytes otherwise)


val = data.windows("val", 128, T + 1, np.random.default_rng(201))
with one_blas_thread():
    seeds = range(lesson.seeds)
    t0 = time.perf_counter()
    sweep = [{lr: placement_race([(p, None) for p in RACED + (NO_NORM,)], lr, s, SWEEP) for lr in LRS}
             for s in seeds]
    t1 = time.perf_counter()
    deep = [placement_race([("pre", None), ("peri", None)], DEEP_LR, s, DEEP, evaluate=False)[0] for s in seeds]
    seed_seconds = {"sweep": (t1 - t0) / len(seeds), "deep": (time.perf_counter() - t1) / len(seeds)}
    qk = [{("pre", None): sw[QK_LR][0]["pre", None],          # the short run's Pre-Norm model at QK_LR
           **placement_race([("pre", "rmsnorm")], QK_LR, s, SWEEP, evaluate=False)[0]} for s, sw in zip(seeds, sweep)]
below_unigram = {(p, lr): np.array([unigram - sw[lr][1][p, None] for sw in sweep])
                 for p in RACED + (NO_NORM,) for lr in LRS}
for key, v in below_unigram.items():
    check(np.all(np.isfinite(v)), f"{key}: finite losses")
    report(lesson, f"  {key[0]:>9} lr {key[1]:g}: nats below the unigram baseline per seed "
                   + ", ".join(f"{b:+.3f}" for b in v))

# %% [markdown]
# ## The hidden states
#
# The variance of the residual stream after each of the 8 blocks, Pre and Peri, after the short training.
# The Peri-LN paper's claim: Pre-LN's can grow fast with depth, Peri-LN's about linearly, because Peri-LN
# normalizes what each block adds. Its "exponentially" is a worst case of its analysis: a bound on what can
# happen, which a typical run neither confirms nor refutes. What a run can show is its typical behaviour, and
# the second row is labelled so: it compares Pre-LN's growth factor per block over the second half of the
# blocks with the first half's (question 2 asks what to expect of that ratio). The variance is taken over
# every token and feature of the stream, on the batch of 16 windows above.

# %%
def stream_variances(model, ids):
    """The variance of the residual stream after the embedding and after each block."""
    hs = [model.tok_emb.forward(ids) + model.pos_emb.forward(np.arange(ids.shape[1]))]      # (B, T, d) each
    for block in model.blocks.children.values():
        hs.append(block.forward(hs[-1]))
    return np.array([float(h.var()) for h in hs])


variances = {p: np.array([stream_variances(d[p, None], batch[:, :-1]) for d in deep]) for p in ("pre", "peri")}
last = {p: np.exp(np.mean(np.log(v[:, -1]))) for p, v in variances.items()}      # geometric mean over seeds
apart = geometric_interval(variances["pre"][:, -1] / variances["peri"][:, -1])
lesson.claim("Peri-LN keeps the hidden states' variance from growing with depth as Pre-LN's does",
             source=work("periln", "variance growth"),
             measured=f"{DEEP} blocks, lr {DEEP_LR:g}, variance of the residual stream after each block (mean "
                      "over seeds), Pre: " + ", ".join(f"{v:.3g}" for v in variances["pre"].mean(0)[1:])
                      + "; Peri: " + ", ".join(f"{v:.3g}" for v in variances["peri"].mean(0)[1:])
                      + f"; last block, Pre over Peri, paired per seed, geometric mean: "
                      f"{interval(*apart, n=len(deep))} (holds from 2)",
             value=apart[0], interval=tuple(apart[1:]), **above(2.0, approx=1.2), expect=VERDICTS)
pre = variances["pre"][:, 1:]                                                     # (seeds, blocks 1..DEEP)
half = DEEP // 2
per_block = [(pre[:, half - 1] / pre[:, 0]) ** (1 / (half - 1)), (pre[:, -1] / pre[:, half - 1]) ** (1 / (DEEP - half))]
bend = geometric_interval(per_block[1] / per_block[0])
lesson.claim("Typical behaviour, not the Peri-LN paper's worst case: in this short training Pre-LN's hidden-state "
             "variance grows by the same factor every block (exponentially)",
             source=COMMON + " (a typical run set beside the worst case of the Peri-LN paper's analysis)",
             measured=f"{DEEP} blocks, the Pre-LN stream's variance grows by {np.mean(per_block[0]):.2f}x a block "
                      f"over blocks 1-{half} and {np.mean(per_block[1]):.2f}x over blocks {half}-{DEEP} (means over "
                      f"seeds); the second factor over the first, per seed, geometric mean: "
                      f"{interval(*bend, n=len(deep))} (1 for an exponential, below 1 for slower growth; holds "
                      "from 0.9). The paper's worst case is a bound, which this typical run does not test",
             value=bend[0], interval=tuple(bend[1:]), **above(0.9, approx=0.75), expect=VERDICTS)
open_rows = {"Pre-LN's growth per block": seeds_to_decide(lesson.claims[-1], len(deep), seed_seconds["deep"])}

# %% [markdown]
# The gradient norms at initialization, graded: the top quarter's feed-forward gradient norm over the bottom
# quarter's, for each placement; the more even, the closer to 1, so the claim compares $|\log|$ of that
# ratio for Peri with Pre's.

# %%
def top_over_bottom(g):
    q = max(1, len(g) // 4)                                          # a quarter of the blocks, at least one
    return float(np.mean(g[-q:]) / np.mean(g[:q]))


spread = {p: np.array([abs(np.log(top_over_bottom(g))) for g in gs]) for p, gs in per_init.items()}
even = geometric_interval(spread["peri"] / spread["pre"])
lesson.claim("Peri-LN's gradient norms are more even across layers than Pre-LN's",
             source=work("periln", "gradient norms"),
             measured=f"at initialization, {DEEP} blocks, top quarter's FFN gradient norm over the bottom "
                      "quarter's (mean profile over initializations): "
                      + ", ".join(f"{p} {top_over_bottom(g):.2f}" for p, g in grads.items())
                      + f"; |log| of Peri's over |log| of Pre's, paired per initialization, geometric mean: "
                      f"{interval(*even, n=len(spread['pre']))} (holds at most 0.67)",
             value=even[0], interval=tuple(even[1:]), **below(0.67, approx=1.0), expect=VERDICTS)
open_rows["Peri-LN's even gradients"] = seeds_to_decide(lesson.claims[-1], len(inits), per_init_seconds)

# %% [markdown]
# The figure: the variance of the residual stream per block (Pre and Peri, 8 blocks; and the four trained
# placements at 4 blocks), and the gradient norm per block at initialization (all five).

# %%
sweep_variances = {p: np.mean([stream_variances(sw[DEEP_LR][0][p, None], val[:32, :-1]) for sw in sweep], axis=0)
                   for p in RACED}
plot_depth(lesson, variances, sweep_variances, grads, steps, DEEP_LR, len(inits))

# %% [markdown]
# ## Attention logits
#
# The largest $|\text{score}|$ over every block, head and pair of positions, after the short training at the
# high rate, Pre-Norm with and without QK-Norm, on 32 validation windows: a score is
# $q \cdot k / \sqrt{d_h}$, read from each attention layer's cache of that forward.

# %%
def max_logit(model, ids):
    """The largest |attention score| of a forward on ``ids``, over every block, head and pair of positions."""
    model.forward(ids)
    caches = [block.children["attn"].f._cache for block in model.blocks.children.values()]
    scores = [c["q"] @ np.swapaxes(c["k"], -1, -2) * c["scale"] for c in caches]   # (batch, heads, T, T) a block
    return max(float(np.abs(S).max()) for S in scores)


logits = {q: np.array([max_logit(models["pre", q], val[:32, :-1]) for models in qk]) for q in (None, "rmsnorm")}
ratio = geometric_interval(logits[None] / logits["rmsnorm"])
lesson.claim("QK-Norm keeps attention logits from growing in training", source=QKNORM,
             measured=f"Pre-Norm, {SWEEP} blocks, lr {QK_LR:g}, the largest |attention score| at the end, per "
                      f"seed: without QK-Norm " + ", ".join(f"{v:.1f}" for v in logits[None])
                      + "; with " + ", ".join(f"{v:.1f}" for v in logits["rmsnorm"])
                      + f"; without over with, paired per seed, geometric mean: {interval(*ratio, n=len(qk))} "
                      "(holds from 3)",
             value=ratio[0], interval=tuple(ratio[1:]), **above(3.0, approx=1.5), expect=expect(lesson, HOLDS))

# %% [markdown]
# ## Short runs: leaving the plateau
#
# DeepNet and Peri-LN claim stability: training that does not diverge or spike, over long runs and a wide
# range of learning rates. Runs of this length cannot show that; what they show is how far below the unigram
# plateau a model gets in its first steps (lesson 11 explains the measure). So the rows below are worded as
# what is measured, at every rate of the sweep: DeepNorm against Post-Norm (holds if at least 0.05 nats, the
# plateau's width, further below), and Peri against Pre (holds if at most 0.02 nats behind), paired per seed.
# "At least as far" is an equivalence, and a bound of 0.02 nats says something only if a model that is plainly
# not Peri-LN can miss it. Each Peri row's control is the placebo from the race: the same Transformer with no
# norm anywhere, on the same seeds and batches, minus Pre, graded on the row's own bounds. Where no norm also
# ends at least as far below the plateau as Pre-LN, a run this short cannot tell a placement from having no
# norm, and the row is inconclusive by construction (`lessons/_grading.py`, `beside_control`).

# %%
n_seeds, per_seed = len(sweep), seed_seconds["sweep"]                 # seeds, and seconds of one seed's sweep
for lr in LRS:
    gain = mean_interval(below_unigram["deepnorm", lr] - below_unigram["post", lr])
    lesson.claim(f"After a short run without warm-up, DeepNorm ends further below the unigram plateau than Post-Norm "
                 f"(lr {lr:g})", source=DEEPNET + " (the short-run side of its stability claim)",
                 measured=f"{SWEEP} blocks, {steps} steps at lr {lr:g}, nats below the unigram baseline: DeepNorm "
                          f"{below_unigram['deepnorm', lr].mean():.3f}, Post-Norm "
                          f"{below_unigram['post', lr].mean():.3f} (means); DeepNorm minus Post-Norm, paired: "
                          f"{interval(*gain, n=n_seeds)} (holds from {PLATEAU} nats)",
                 value=gain[0], interval=gain[1:], **above(PLATEAU, approx=0.0), expect=VERDICTS)
    open_rows[f"DeepNorm against Post-Norm at lr {lr:g}"] = seeds_to_decide(lesson.claims[-1], n_seeds, per_seed)
    peri = mean_interval(below_unigram["peri", lr] - below_unigram["pre", lr])
    placebo = mean_interval(below_unigram[NO_NORM, lr] - below_unigram["pre", lr])
    lesson.claim(f"After a short run without warm-up, Peri-LN ends at least as far below the unigram plateau as "
                 f"Pre-LN (lr {lr:g})", source=COMMON + " (the short-run side of the Peri-LN paper's stability claim)",
                 measured=f"{SWEEP} blocks, {steps} steps at lr {lr:g}, nats below the unigram baseline: Peri "
                          f"{below_unigram['peri', lr].mean():.3f}, Pre {below_unigram['pre', lr].mean():.3f} (means); "
                          f"Peri minus Pre, paired: {interval(*peri, n=n_seeds)} (holds from -0.02); the control, "
                          f"no norm ({below_unigram[NO_NORM, lr].mean():.3f}) minus Pre, paired: "
                          f"{interval(*placebo, n=n_seeds)}",
                 value=peri[0], interval=peri[1:], **above(-0.02, approx=-0.1),
                 control=control("no norm against Pre-LN", placebo[0], placebo[1:]), expect=VERDICTS)
    open_rows[f"Peri-LN against Pre-LN at lr {lr:g}"] = seeds_to_decide(lesson.claims[-1], n_seeds, per_seed)

# %% [markdown]
# The figure: the largest attention logit with and without QK-Norm (one point per seed, the bar their
# geometric mean); and the nats below the unigram baseline at the end against the learning rate, per
# placement (higher is better; the grey band: still on the plateau).

# %%
plot_logits_and_sweep(lesson, logits, {key: v for key, v in below_unigram.items() if key[0] in RACED}, LRS,
                      PLATEAU, SWEEP, steps, QK_LR)

# %% [markdown]
# ## Questions
#
# **1.** Why should normalizing what each block adds (Peri-LN) slow the growth of the residual stream's
# variance, compared with Pre-LN?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"The stream is the embedding plus what the blocks add. Pre-LN adds F(Norm(x)) unnormalized, and its "
              f"size can grow in training; Peri-LN passes it through Norm_out first, so each addition has a size set "
              f"by that norm's weights. After {DEEP} blocks the variance was {last['pre']:.3g} for Pre, "
              f"{last['peri']:.3g} for Peri (geometric means over seeds).")

# %% [markdown]
# **2.** In Pre-LN, what a block adds is computed from the normalized stream. If every block added about as
# much as the one before, would the stream's per-block growth factor stay the same with depth, rise or fall?
# What did this run show, and why can a run not refute the paper's worst case?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
v0, v1 = variances["pre"][:, 0], variances["pre"][:, 1]                # (seeds,): the embedding, block 1
straight = v0[:, None] + np.arange(DEEP + 1) * (v1 - v0)[:, None]       # (seeds, blocks 0..DEEP): equal additions
linear = [np.mean((straight[:, half] / straight[:, 1]) ** (1 / (half - 1))),
          np.mean((straight[:, -1] / straight[:, half]) ** (1 / (DEEP - half)))]
lesson.answer(f"It falls, since equal additions make the variance grow about linearly, v0 + l a after l blocks, "
              "and the factor from one block to the next, 1 + a / (v0 + (l - 1) a), shrinks toward 1 as the stream "
              "grows. Only additions in proportion to the stream, which the norm before F does not pass on, keep the "
              f"factor constant (an exponential). Linear growth from this run's embedding and first block would give "
              f"{linear[0]:.2f}x a block over blocks 1-{half} and {linear[1]:.2f}x over blocks {half}-{DEEP}, a ratio "
              f"of {linear[1] / linear[0]:.2f}; the run gave {np.mean(per_block[0]):.2f}x and "
              f"{np.mean(per_block[1]):.2f}x (means over seeds), a ratio of {interval(*bend, n=len(deep))}, an "
              f"interval that {'holds' if bend[1] <= linear[1] / linear[0] <= bend[2] else 'leaves out'} the linear "
              f"ratio and {'holds' if bend[1] <= 1 <= bend[2] else 'leaves out'} the exponential's 1. A worst case "
              "bounds what can happen; a typical run that grows more slowly is consistent with it, so the row grades "
              "typical behaviour, not the paper's statement.")

# %% [markdown]
# **3.** Why does normalizing the queries and keys bound the attention scores, whatever the projections
# learn?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"A score is q . k times a fixed scale, and |q . k| <= |q| |k|. After RMSNorm each of q and k has a "
              f"length fixed by the head size and the norm's weights, however large the projections grow; without "
              f"it the scores grow with them. Largest score: {logits[None].mean():.1f} without, "
              f"{logits['rmsnorm'].mean():.1f} with QK-Norm (ratio, geometric mean over seeds, {ratio[0]:.1f}).")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    f"Where the norm sits decides what it bounds: Pre-LN never normalizes the stream, and after the short training "
    f"its last block's variance was {last['pre']:.3g} against Peri-LN's {last['peri']:.3g}, which normalizes what "
    "each block adds ('Peri-LN keeps the variance from growing': " + lesson.result("keeps the hidden states' variance")
    + "). A norm on q and k bounds the attention logits the same way: "
    + lesson.result("QK-Norm keeps attention logits")
    + ".",
    "Stability is a claim about long runs; a short run shows only how fast a placement leaves the plateau, and that "
    "depends on the learning rate: DeepNorm against Post-Norm, by rate: " + lesson.results("DeepNorm ends further")
    + ". Peri-LN against Pre-LN, by rate: " + lesson.results("Peri-LN ends at least as far") + "; the same bound "
    "on the placebo, no norm against Pre-LN: " + "; ".join(
        f"lr {lr:g}: {c.control['verdict']} ({interval(c.control['value'], *c.control['interval'])})"
        for lr, c in zip(LRS, (c for c in lesson.claims if "Peri-LN ends at least as far" in c.claim)))
    + ". Where the placebo passes too, a run this short cannot tell a placement from no norm at all.",
    "Still open, and what would decide each (computed from its interval; a seed of the sweep is all three rates): "
    + ("; ".join(f"{row}: {said}" for row, said in open_rows.items() if said) or "none") + ".")

# %%
lesson.finish()
