# %% [markdown]
# # Gradients at initialization: Pre-Norm and Post-Norm, graded at several depths.
#
# Lesson 11 named the two placements by what they normalize: Pre-Norm's block is $x + F(\mathrm{Norm}(x))$,
# Post-Norm's $\mathrm{Norm}(x + F(x))$. This lesson measures what Xiong et al. (2020) prove about them before
# any training: how the gradient reaching each block depends on its depth in the stack. It takes the most
# initializations of the course, so it has a lesson of its own (it was lesson 11's first half, which ran past
# the lessons' minute with it).

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import time

import numpy as np

from lessons._common import COMMON, VERDICTS, check, start
from lessons._grading import above, within
from lessons._stats import geometric_interval, mean_interval
from lessons._corpus import char_data
from lessons._placement_plots import plot_gradients
from lessons._training import forecast_check, interval, one_blas_thread, race, report, seeds_to_decide, warm_up
from lessons._training_plots import STYLE
from scratchnorm import nn

lesson = start(__name__, "27_gradients_at_initialization")

# %% [markdown]
# ## Gradients at initialization
#
# A stack of Transformer blocks (`nn.Transformer`: $d = 32$, 2 heads, a feed-forward of $4d$ with GELU),
# reading contexts of 16 characters of Python's docstrings (`lessons/_corpus.py`; one batch of 16 windows,
# seeded), one forward and backward of the next-character cross-entropy, and the norm of the gradient of each
# block's two feed-forward weight matrices, $\sqrt{\lVert \partial L/\partial W_1\rVert^2 +
# \lVert \partial L/\partial W_2\rVert^2}$, block 1 at the input, for many initializations (initialization
# $s$ is `seed=s`). The profile's shape is summed up by one ratio, the mean gradient norm of the top quarter of
# the blocks over that of the bottom quarter, measured at several depths; its geometric mean over the
# initializations comes with a 95% interval.
#
# No training happens here, so initializations are cheap, and they get counts of their own, apart from the
# training seeds (`--seeds`) of the course's runs. At 5 initializations all graded rows but one were inconclusive;
# a pilot of 40 (initializations 0–39) decided the 8- and 16-block rows and left the shallow ones straddling a
# bound, where a block costs least. So every depth gets the same work, `INIT_BLOCKS` = 640 blocks built: 640 / L
# initializations of L blocks (320 at 2 blocks, 40 at 16) for LayerNorm, whose rows are graded; RMSNorm's
# profiles, drawn only, keep the training seeds' count. The pilot chose those counts, so it grades nothing: the
# graded initializations are fresh, from 100 on (the ledger records which chose and which graded).
#
# That fresh set decided all rows but three, each with its estimate within 0.05 of a bound, and the ledger's
# forecast (`seeds_to_decide`: the count that would narrow the interval clear of the bound if the estimate
# stayed put) asked for about 338 initializations at 2 blocks (Post-LN), 411 at 4 (Pre-LN) and 85 at 8
# (Post-LN). So the first fresh set became the pilot of those three rows: each is graded on a second fresh set,
# twice its forecast (`OPEN_ROWS`: 676, 822 and 170 initializations, from 1000 on), the count fixed before the
# run and not changed after it. The cell below also checks the forecast against that rerun.

# %%
NORMS, PLACEMENTS = ("layernorm", "rmsnorm"), ("pre", "post")
D, HEADS, T, BATCH = 32, 2, 16, 16
INIT_BLOCKS, FIRST_INIT = 640, 100    # at init: LayerNorm's blocks built per depth; the first fresh initialization
OPEN_ROWS, FRESH = {("post", 2): 676, ("pre", 4): 822, ("post", 8): 170}, 1000   # the rows the first fresh
#                                  set left open, twice its forecast (338, 411, 85), and their own fresh set
XIONG = COMMON + " (Xiong et al. 2020, On Layer Normalization in the Transformer Architecture, arXiv 2002.04745)"


def transformer(norm, placement, layers, seed):
    return nn.Transformer(data.vocab_size, D, HEADS, layers, T, norm=norm, placement=placement, seed=seed)


def ffn_gradients(model, windows):
    """Per block (input first), the norm of the gradient of its two feed-forward weight matrices after one
    forward and backward of the next-character loss on ``windows``."""
    ce = nn.SoftmaxCrossEntropy()
    ce.forward(model.forward(windows[:, :-1]), windows[:, 1:])
    model.backward(ce.backward())
    return np.array([np.sqrt(sum(np.sum(np.square(model.grads[f"blocks.{i}.mlp.f.{j}.weight"])) for j in (0, 2)))
                     for i in range(model.n_layers)])


def top_over_bottom(g):
    q = max(1, len(g) // 4)                                          # a quarter of the blocks, at least one
    return float(np.mean(g[-q:]) / np.mean(g[:q]))


data, rng = char_data(), np.random.default_rng(11)
batch = data.windows("train", BATCH, T + 1, rng)
depths = lesson.pick((2, 4), (2, 4, 8, 16))
inits = {(n, L): range(FIRST_INIT, FIRST_INIT + (lesson.pick(lesson.seeds, INIT_BLOCKS // L) if n == "layernorm"
                                                   else lesson.seeds)) for n in NORMS for L in depths}
lesson.seed_roles.append({"knob": f"the initializations per depth at init, {INIT_BLOCKS} / L (a pilot of 40 at "
                                  "every depth left the 2- and 4-block rows inconclusive)", "chose": [0, 39],
                          "graded": [FIRST_INIT, FIRST_INIT + max(len(r) for r in inits.values()) - 1]})
reruns = {k: range(FRESH, FRESH + lesson.pick(lesson.seeds, n)) for k, n in OPEN_ROWS.items() if k[1] in depths}
lesson.seed_roles.append({"knob": "the initializations of the three at-init rows the first graded set left open, 2x "
                          "its forecast (338, 411, 85)", "chose": lesson.seed_roles[-1]["graded"],
                          "graded": [FRESH, FRESH + max(len(r) for r in reruns.values()) - 1]})
depth = depths[-1]                                                  # the left panel's profile
with one_blas_thread():
    warm_up([transformer(n, "pre", 1, 0) for n in NORMS], batch[:, :-1], batch[:, 1:])
    t0 = time.perf_counter()
    per_init = {(n, p, L): [ffn_gradients(transformer(n, p, L, s), batch) for s in inits[n, L]]
                for n in NORMS for p in PLACEMENTS for L in depths}
    rerun_ratios = {key: [top_over_bottom(ffn_gradients(transformer("layernorm", *key, s), batch)) for s in r]
                    for key, r in reruns.items()}
    at_init_seconds = time.perf_counter() - t0                      # both sets
profiles = {(n, p): np.mean(per_init[n, p, depth], axis=0) for n in NORMS for p in PLACEMENTS}
# top quarter over bottom quarter: geometric mean over the initializations and its 95% interval
ratios = {key: [top_over_bottom(g) for g in gs] for key, gs in per_init.items()}
spreads = {key: geometric_interval(r) for key, r in ratios.items()}
for key, prof in profiles.items():
    check(np.all(np.isfinite(prof)) and np.all(prof > 0), f"{key}: gradients are finite and nonzero")
    report(lesson, f"  {key[1]:>4}-{STYLE[key[0]][1]:<10} FFN gradient norm per block (input -> output): "
                   + " ".join(f"{g:.2f}" for g in prof) + f"; top/bottom quarter for {depths} blocks: "
                   + " ".join(f"{spreads[key + (L,)][0]:.2f}" for L in depths))

# %% [markdown]
# Xiong et al. (2020, arXiv 2002.04745) prove and plot that at initialization Post-LN's gradient norm rises
# toward the output, and report that Pre-LN's stays about the same across layers; what in each placement
# would shape a profile so is the first question at the end. The ledger grades both statements of Xiong et
# al. at every depth of the right panel (a statement about Post-LN in general should hold at each), each on
# its interval over the initializations. The cell above prints the profiles and ratios.

# %%
BOUNDS = {"post": above(1.2, approx=1.0), "pre": within(1 / 1.5, 1.5, approx=(0.5, 2.0))}
SAID = {"post": ("Post-LN's gradient norm grows toward the output layer", "holds: at least 1.2"),
        "pre": ("Pre-LN's gradient norm is about the same in every layer", "holds within a factor 1.5")}
per_block = at_init_seconds / sum(len(v) * key[-1] for key, v in (per_init | rerun_ratios).items())   # seconds
graded, open_at_init = dict(spreads), []                            # the rows as graded; those left open
for L, p in [(L, p) for L in depths for p in ("post", "pre")]:
    g, n_L = spreads["layernorm", p, L], len(inits["layernorm", L])
    measured = f"geometric mean over initializations: {interval(*g, n=n_L)}"
    if (p, L) in reruns:                                            # graded on its own fresh set
        fresh = rerun_ratios[p, L]
        n_L, found = len(fresh), forecast_check(ratios["layernorm", p, L], fresh, BOUNDS[p], geometric_interval)
        check(lesson.quick or 2 * found[0] == OPEN_ROWS[p, L], f"{p}, {L}: twice the pilot's forecast")
        graded["layernorm", p, L] = g = geometric_interval(fresh)
        measured = (f"over a fresh set of {n_L} (from {FRESH}): {interval(*g)}; its pilot, the first graded set, "
                    f"{measured}" + (f", whose forecast asked for about {found[0]}; the first {found[0]} of the fresh "
                                     f"set: {interval(*found[1])}, {found[2]}" if found else ""))
    lesson.claim(f"At initialization {SAID[p][0]} ({L} blocks)", source=XIONG, measured=f"{L} blocks, top quarter "
                 f"/ bottom quarter of the FFN gradient norms, {measured} ({SAID[p][1]})", value=g[0],
                 interval=tuple(g[1:]), **BOUNDS[p], expect=VERDICTS)
    if decide := seeds_to_decide(lesson.claims[-1], n_L, per_block * L):     # '' once decided
        open_at_init.append(f"{SAID[p][0]} ({L} blocks): {decide}")

# %% [markdown]
# The forecast is only as good as the estimate it starts from: it assumes the estimate stays put, and a row whose
# estimate sits close to a bound moves by about as much as its distance from it when new initializations come
# in. Each of the three rows' measured text (printed when the lesson runs alone, and in the ledger) gives the
# pilot's interval, the count its forecast asked for, the interval of that many fresh initializations, and that
# of the whole fresh set, twice the forecast, the one graded. A row the fresh set leaves open keeps
# "inconclusive", and the takeaways say how many a next set would need; adding initializations after looking at
# this one would make it a pilot again.
#
# The figure: on the left the gradient norm per block at initialization; on the right the ratio of the top
# blocks' gradient to the bottom blocks' against depth, as graded (the three rows above on their fresh sets).

# %%
counts = " / ".join(str(len(inits["layernorm", L])) for L in depths)
plot_gradients(lesson, profiles, graded, depths, f"LayerNorm {counts} at {' / '.join(map(str, depths))} blocks,\n"
               f"fresh: {', '.join(f'{p}-LN {L}: {len(r)}' for (p, L), r in reruns.items())}; RMSNorm {lesson.seeds}")

# %% [markdown]
# ## Short runs of a deeper model
#
# Xiong et al. connect Post-LN's profile to training: the large gradients near the output are why Post-LN needs
# a warm-up of the learning rate, and Pre-LN trains without one; the usual reading is that Pre-Norm trains deeper
# models. Lesson 11 ran 4-block models at three learning rates; here an 8-block model of each placement
# (LayerNorm) runs the same way at lesson 11's smallest rate: 80 steps of Adam without warm-up, on the same
# batches of 16 windows, for every seed (`--seeds N`, default 5: seed $s$ initializes the models with `seed=s` and
# draws the batches and 128 validation windows from `default_rng(110 + s)`, as lesson 11's runs do). What is
# recorded is how far below the unigram baseline (lesson 11's yardstick: the loss of predicting each character
# by its frequency) the validation loss ends; the comparison is paired per seed and holds if all of its 95%
# interval is at least 0.05 nats (lesson 11's plateau) in Pre-Norm's favour, does not hold if all of it favours
# Post-Norm. The models train on numba's kernels, the library's default.

# %%
DEEP_LAYERS, DEEP_LR, BETAS, LEFT_PLATEAU = 8, 3e-3, (0.9, 0.99), 0.05
final_steps = lesson.pick(20, 80)


def deep_runs(seed):
    """The validation loss at the end of each placement's 8-block run, all on the same batches: {placement: loss}."""
    rng = np.random.default_rng(110 + seed)
    runs = {}
    for placement in PLACEMENTS:
        model = transformer("layernorm", placement, DEEP_LAYERS, seed)
        runs[placement] = (model, nn.Adam(model, lr=DEEP_LR, betas=BETAS))
    batches = [(w[:, :-1], w[:, 1:]) for w in (data.windows("train", BATCH, T + 1, rng) for _ in range(final_steps))]
    val, ce = data.windows("val", 128, T + 1, rng), nn.SoftmaxCrossEntropy()
    curves = race(runs, batches, lambda m: float(ce.forward(m.forward(val[:, :-1]), val[:, 1:])), final_steps,
                  {p: (lambda s: DEEP_LR) for p in PLACEMENTS}, at={final_steps})     # only the end is read
    return {p: c.loss[-1] for p, c in curves.items()}


unigram = data.unigram_loss()
with one_blas_thread():
    t0 = time.perf_counter()
    deep = [deep_runs(seed) for seed in range(lesson.seeds)]            # one {placement: loss} per seed
    per_seed = (time.perf_counter() - t0) / len(deep)
ends = {p: np.array([unigram - f[p] for f in deep]) for p in PLACEMENTS}    # nats below the baseline, per seed
gap = mean_interval(ends["pre"] - ends["post"])
report(lesson, f"  {DEEP_LAYERS} blocks, lr {DEEP_LR:g}: final validation loss per seed, pre "
               + ", ".join(f"{f['pre']:.3f}" for f in deep) + "; post " + ", ".join(f"{f['post']:.3f}" for f in deep)
               + f" (unigram {unigram:.3f})")
lesson.claim(f"After a short run, a deeper ({DEEP_LAYERS}-block) Pre-Norm model ends further below the unigram "
             "plateau than a Post-Norm one", source=COMMON + " (the usual reading: 'Pre-Norm trains deeper models')",
             measured=f"LayerNorm, {final_steps} steps of Adam at lr {DEEP_LR:g} without warm-up, nats below the "
                      f"unigram baseline at the end, pre / post (mean over seeds): {ends['pre'].mean():.2f} / "
                      f"{ends['post'].mean():.2f}; pre minus post, paired: {interval(*gap, n=len(deep))} (holds: at "
                      f"least {LEFT_PLATEAU} nats)",
             value=gap[0], interval=gap[1:], **above(LEFT_PLATEAU, approx=0.0), expect=VERDICTS)
open_deep = seeds_to_decide(lesson.claims[-1], len(deep), per_seed)     # '' once decided

# %% [markdown]
# ## Questions
#
# **1.** At initialization, what sets the shape of the gradient profile in each placement, and what did it
# look like here at each depth?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer("In Post-Norm a lower block's gradient reaches it only through the norm of every block above it; in "
              "Pre-Norm the skip path carries the output's gradient down unchanged and every block adds its share on "
              "the way, so the first can make the profile rise toward the output and nothing forces the second to "
              "be flat. The top quarter's gradient over the bottom quarter's (LayerNorm, geometric mean over "
              "initializations), by depth: " + "; ".join(
                  f"{L} blocks Post-LN {graded['layernorm', 'post', L][0]:.2f}, Pre-LN "
                  f"{graded['layernorm', 'pre', L][0]:.2f}" for L in depths) + ".")


# %% [markdown]
# **2.** Explainer 003's naming of the placements was first graded on the gradient profile (a rising profile
# would be Xiong et al.'s Post-LN). Why is a gradient profile a poor test of which placement a block is?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
pre, post = graded["layernorm", "pre", depth], graded["layernorm", "post", depth]
lesson.answer(f"A profile depends on the initialization, the depth and the task, and a placement need not show the "
              f"textbook shape: at {depth} blocks the real Post-LN's top quarter got {post[0]:.2f} times the bottom "
              f"quarter's gradient [{post[1]:.2f}, {post[2]:.2f}], so it would fail a test of 'rising' too, and "
              f"x + F(LN(x)) got {pre[0]:.2f}. The definition is a property every block has at every seed, which "
              "lesson 11 grades: Norm(x + F(x)) leaves the stream normalized after every block, x + F(Norm(x)) "
              "does not.")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    "A proof about Post-LN's gradient at initialization is a claim to measure, not a law; measured over several "
    "initializations of these small models, its rise toward the output, by depth: "
    + lesson.results("Post-LN's gradient norm grows") + f" (at {INIT_BLOCKS} / L initializations, and the rows "
    f"those left open on a fresh set twice their forecast; {at_init_seconds:.0f} s for all of "
    "them)." + (" Still open: " + "; ".join(open_at_init) + "." if open_at_init else ""),
    "Pre-LN's profile, by depth: " + lesson.results("Pre-LN's gradient norm is about the same") + "; a forecast of "
    "the initializations that would decide a row assumes its estimate stays put, and a row graded on a fresh set "
    "twice the forecast can still move toward its bound and stay open.",
    "Whether the profile shows in training, at 8 blocks and a short run: "
    + lesson.result("a deeper (8-block) Pre-Norm model") + (f"; {open_deep}" if open_deep else "") + ".")

# %%
lesson.finish()
