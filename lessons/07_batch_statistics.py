# %% [markdown]
# # Batch statistics: BatchNorm's output depends on the batch, LayerNorm's and GroupNorm's do not.
#
# In training mode BatchNorm normalizes feature $j$ of example $x_0$ with the mean and variance of that
# feature over the batch of $B$ examples it sits in:
#
# $$
# y_{0,j} = \frac{x_{0,j} - \mu_{B,j}}{\sqrt{\sigma^2_{B,j} + \epsilon}} .
# $$
#
# $\mu_B$ and $\sigma^2_B$ are estimates from $B$ samples, off by about $\sigma/\sqrt{B}$ and
# $\sigma^2\sqrt{2/B}$, so the same $x_0$ gets a different output in every batch, with a spread of about
#
# $$
# \sqrt{\frac{1 + \hat x_{0,j}^2/2}{B}} ,
# $$
#
# where $\hat x_{0,j}$ is $x_{0,j}$ normalized with the population's mean and standard deviation: the spread
# shrinks like $1/\sqrt{B}$. At $B = 2$ every output is exactly $+1$ or $-1$, whatever $x_0$ is. In eval mode
# BatchNorm uses running averages of the batch statistics instead, a fixed map: the train/eval gap for the
# same batch is the batch noise again and shrinks the same way.
#
# LayerNorm, RMSNorm and GroupNorm take their statistics inside one example, so an example's output does
# not depend on its batch-mates at all.
#
# GroupNorm$(G, C)$ on an input of shape $(N, C, L)$ normalizes each example over groups of $C/G$ channels.
# $G = C$ is InstanceNorm (each channel over its positions). $G = 1$ normalizes the whole $(C, L)$ example, as
# LayerNorm over $(C, L)$ does. Whether the two layers are the same layer, their learned scale and shift
# included, is measured below; question 3 asks why it comes out as it does.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import numpy as np

import scratchnorm as sn
from lessons._batch_plots import plot_batch_size, plot_groupnorm
from lessons._common import HOLDS, check, explainer, start
from lessons._differences import vjp_by_differences
from lessons._grading import below
from lessons._stats import fit_slope, rms
from lessons._training import report
from scratchnorm import BatchNorm, GroupNorm, LayerNorm, RMSNorm, batch_norm_forward

lesson = start(__name__, "07_batch_statistics")

# %% [markdown]
# ## One fixed example in random batches
#
# The data: $D = 16$ features, feature $j$ drawn from $\mathcal{N}(\mathrm{mean}_j, \mathrm{std}_j^2)$ with its
# own mean (uniform in $[-2, 2]$) and standard deviation (uniform in $[0.5, 2]$), and one fixed example $x_0$
# drawn from them. The lesson puts $x_0$ at a random place in many random batches of every size $B$ and records its
# BatchNorm output in training mode (the batch's statistics), and the largest change of its LayerNorm, RMSNorm
# and GroupNorm outputs between batches (GroupNorm with 2 groups sees the 16 features as 4 channels of 4
# positions). The spread of the BatchNorm output over batches (its std over the batches, RMS over the features)
# is fitted as a power of $B$, from $B = 8$ on, and compared with the prediction above. Every layer runs on the
# NumPy backend.

# %%
D, KW = 16, dict(backend="numpy")
rng = np.random.default_rng(7)
mean, std = rng.uniform(-2, 2, D), rng.uniform(0.5, 2, D)            # feature j ~ N(mean_j, std_j^2)


def sample(n):
    """n fresh examples, (n, D)."""
    return mean + std * rng.standard_normal((n, D))


x0 = sample(1)[0]                                                    # the fixed example, (D,)
sizes = np.array(lesson.pick([2, 4, 8, 16, 32, 64], [2, 4, 8, 16, 32, 64, 128, 256, 512]))
others = {"LayerNorm": LayerNorm(D, **KW), "RMSNorm": RMSNorm(D, **KW), "GroupNorm": GroupNorm(2, 4, **KW)}
bn_out, other_change = {}, dict.fromkeys(others, 0.0)   # B -> x0's BatchNorm outputs; name -> largest change
for B in sizes:
    ys, first = [], {}
    for _ in range(lesson.pick(60, 400)):
        xb, i = sample(B), rng.integers(B)
        xb[i] = x0                                                   # x0 among B - 1 fresh examples
        ys.append(batch_norm_forward(xb)[0][i])                      # training mode: the batch's statistics
        for name, layer in others.items():
            y0 = layer.forward(xb.reshape(B, 4, 4) if name == "GroupNorm" else xb).reshape(B, D)[i]
            first.setdefault(name, y0)
            other_change[name] = max(other_change[name], float(np.max(np.abs(y0 - first[name]))))
    bn_out[B] = np.array(ys)                                         # (batches, D)
spread = np.array([rms(bn_out[B].std(axis=0)) for B in sizes])       # std over batches, RMS over features
at2 = np.abs(bn_out[2])                                              # sqrt(var / (var + eps)) <= 1
check(np.all(at2 <= 1) and np.median(1 - at2) < 1e-3, "at B = 2 BatchNorm outputs are +-1 (up to eps)")
slope, amp = fit_slope(sizes, spread, 8)
x0_hat = (x0 - mean) / std                                          # x0 in population units
predicted = rms(np.sqrt(1 + x0_hat**2 / 2))                          # spread * sqrt(B) for large B
noise = (f"one fixed example, same BatchNorm: its output (RMS over {D} features) changes between batches by "
         f"{spread[0]:.2f} at B = 2, {spread[-1]:.3f} at B = {sizes[-1]}, fitted ∝ B^{slope:.2f} (B ≥ 8; "
         f"{amp:.2f}/√B, predicted {predicted:.2f}/√B)")
lesson.claim("BatchNorm does badly at small batch sizes: an example's output depends on the rest of its batch, "
             "by about 1/√B (what is measured here is that noise, not the accuracy of a trained model)",
             source=explainer("002", "§1.3.1 (1), points 3-4"), measured=noise + "; value: |slope + 1/2|",
             value=abs(slope + 0.5), **below(0.1, approx=0.25), expect=HOLDS)

# %% [markdown]
# ## Training against inference
#
# In eval mode BatchNorm normalizes with running averages of the batch statistics (momentum 0.1,
# `running_var` unbiased). For each $B$ a fresh BatchNorm trains its running statistics on batches of size
# $B$; then, on new batches, its training-mode output (batch statistics) is compared with its eval-mode
# output (running statistics) for the same batch.

# %%
gap = []                                       # RMS of training-mode minus eval-mode output, per B
for B in sizes:
    bn = BatchNorm(D, **KW)
    for _ in range(lesson.pick(60, 200)):
        bn.forward(sample(B))                                        # updates running_mean / running_var
    bn.eval()
    test = [sample(B) for _ in range(lesson.pick(10, 40))]
    gap.append(rms(np.array([batch_norm_forward(xb, eps=bn.eps)[0] - bn.forward(xb) for xb in test])))
gap = np.array(gap)
gap_slope = fit_slope(sizes, gap, 8)[0]
mode_gap = (f"train/eval gap on the same batch {gap[0]:.2f} at B = 2, {gap[-1]:.3f} at B = {sizes[-1]}, "
            f"∝ B^{gap_slope:.2f}")
check(gap[0] > 0.3, "at B = 2 training and inference outputs differ by a large fraction of the output")
lesson.claim("BatchNorm behaves differently in training and inference (batch statistics against running "
             "ones), most at small batches", source=explainer("002", "§1.3.1 (1), points 3-4"),
             measured=mode_gap + "; value: |slope + 1/2|",
             value=abs(gap_slope + 0.5), **below(0.15, approx=0.3), expect=HOLDS)

# %% [markdown]
# ## Statistics inside one example
#
# LayerNorm, RMSNorm and GroupNorm saw the same random batches as BatchNorm above; since their statistics
# come from the example alone, the fixed example's output should be the same bit for bit in every batch.

# %%
lesson.claim("LayerNorm, RMSNorm and GroupNorm do not depend on the batch", source=explainer("002",
             "§1.3.1 (2) and (4)"),
             measured="largest change of a fixed example's output over random batches of B = 2.."
                      f"{sizes[-1]}: " + ", ".join(f"{k} {v:g}" for k, v in other_change.items()),
             value=max(other_change.values()), **below(0.0, approx=1e-12), expect=HOLDS)

# %% [markdown]
# ## GroupNorm between InstanceNorm and LayerNorm
#
# On inputs of shape $(N, C, L)$ with $C = 16$ channels of $L = 8$ positions, GroupNorm$(G, C)$ with weight 1
# and bias 0 is run for every divisor $G$ of $C$ and compared with the definitions written out: InstanceNorm
# (statistics per example and channel, over $L$) and LayerNorm over $(C, L)$ (statistics per example, over
# $C$ and $L$). The two ends should match, and every $G$ in between should differ from both.

# %%
def normalize_over(x, axes, eps=1e-5):
    """The definition, written out: (x - mean) / sqrt(var + eps) with the statistics over `axes`."""
    xm = x - x.mean(axis=axes, keepdims=True)
    return xm / np.sqrt((xm * xm).mean(axis=axes, keepdims=True) + eps)


n, C, L = lesson.pick(16, 64), 16, 8
x = rng.standard_normal((n, C, L)) * rng.uniform(0.5, 3, (1, C, 1)) + rng.uniform(-2, 2, (1, C, 1))   # (n, C, L)
ref_in, ref_ln = normalize_over(x, 2), normalize_over(x, (1, 2))    # InstanceNorm; LayerNorm over (C, L)
groups = np.array([G for G in range(1, C + 1) if C % G == 0])
y_gn = {G: GroupNorm(G, C, **KW).forward(x) for G in groups}         # weight 1, bias 0
to_in, to_ln = np.array([rms(y_gn[G] - ref_in) for G in groups]), np.array([rms(y_gn[G] - ref_ln) for G in groups])
check(to_in[-1] < 1e-14 and to_ln[0] < 1e-14, "G = C is InstanceNorm and G = 1 normalizes like LayerNorm")
check(min(to_in[:-1].min(), to_ln[1:].min()) > 0.05, "the other G differ from both")
lesson.claim("GroupNorm with G = 1 normalizes like LayerNorm over (C, *), and G = C like InstanceNorm",
             source=explainer("002", "§1.3.1 (4), point 6"),
             measured=f"C = {C}, L = {L}, no affine, RMS difference from the definitions: GN(1, C) − LN over "
                      f"(C, L) {to_ln[0]:.0e}, GN(C, C) − IN {to_in[-1]:.0e}",
             value=max(to_ln[0], to_in[-1]), **below(1e-12, approx=1e-6), expect=HOLDS)

# %% [markdown]
# With the affine the two differ. First, LayerNorm given GroupNorm's per-channel weights and biases, each
# repeated over the $L$ positions, must agree with GroupNorm$(1, C)$. Then LayerNorm gets a random
# per-element affine, and the closest per-channel affine (least squares on the shared $\hat x$) is fitted to
# its output: the relative residual says how much of LayerNorm's affine GroupNorm cannot express.

# %%
def channel_affine_residual(x_hat, y):
    """How far y (N, C, L) is from the closest per-channel affine map of x_hat, a_c x_hat + b_c (least squares
    per channel): the RMS of the residual over the RMS of y."""
    n, C, L = x_hat.shape
    resid = []
    for c in range(C):
        A = np.c_[x_hat[:, c].ravel(), np.ones(n * L)]                 # (n L, 2): x_hat and 1
        coef = np.linalg.lstsq(A, y[:, c].ravel(), rcond=None)[0]       # (a_c, b_c)
        resid.append(y[:, c].ravel() - A @ coef)
    return rms(np.array(resid)) / rms(y)


gn, ln = GroupNorm(1, C, **KW), LayerNorm(C * L, **KW)
gn.params["weight"], gn.params["bias"] = rng.uniform(0.5, 2, C), rng.normal(0, 1, C)
y_gn = gn.forward(x)
ln.params["weight"] = np.repeat(gn.params["weight"], L)             # the per-channel affine, spread out
ln.params["bias"] = np.repeat(gn.params["bias"], L)
same = rms(ln.forward(x.reshape(n, -1)).reshape(x.shape) - y_gn) / rms(y_gn)
ln.params["weight"], ln.params["bias"] = rng.uniform(0.5, 2, C * L), rng.normal(0, 1, C * L)   # per element
y_ln = ln.forward(x.reshape(n, -1)).reshape(x.shape)
resid = channel_affine_residual(GroupNorm(1, C, affine=False, **KW).forward(x), y_ln)   # both share x_hat
check(same < 1e-14, "LayerNorm with GroupNorm's per-channel affine spread over the positions agrees")
check(resid > 0.1, "no per-channel affine reproduces a random per-element one")
report(lesson, f"  the best per-channel affine matches LayerNorm's random per-element one up to a relative residual "
               f"of {resid:.2f}; what decides it is fixed by the two layers' definitions (question 3), so this is "
               "a check, not a claim")

# %% [markdown]
# ## The figures
#
# The figures are drawn by `lessons/_batch_plots.py` from the numbers above. The batch-size figure. Left: the
# BatchNorm outputs of one fixed example (one feature, the one furthest from its mean) in many random batches,
# against $B$. Right: the spread of that output over batches and the train/eval gap, against $B$, on log-log
# axes with the fitted slopes (about $-1/2$).

# %%
plot_batch_size(lesson, rng, sizes, bn_out, x0_hat, spread, gap, slope, gap_slope, predicted)

# %% [markdown]
# The GroupNorm figure: GroupNorm$(G, C)$ for every divisor $G$ of $C$, compared with InstanceNorm and with
# LayerNorm over $(C, L)$ (no affine): the difference vanishes at $G = C$ and at $G = 1$ respectively. On the
# left a linear axis (the differences between the ends are of order one); on the right the two vanishing ends in
# units of float64's machine epsilon, where round-off can be read.

# %%
plot_groupnorm(lesson, groups, to_in, to_ln, C, L)

# %% [markdown]
# ## BatchNorm's backward, node by node
#
# In training mode every example's gradient depends on the whole batch, through $\mu_B$ and $\sigma^2_B$.
# The graph is LayerNorm's (lesson 04), with the statistics taken down the batch instead of along the
# features: for an input of shape $(B, C)$, per channel $j$ ($x_c$ is the centred input, as in lesson 04),
# $\mu_j = \frac{1}{B}\sum_n x_{n,j}$; $x_c = x - \mu$; $v_j = \frac{1}{B}\sum_n x_{c;n,j}^2$;
# $\mathrm{rstd}_j = (v_j + \epsilon)^{-1/2}$; $\hat{x} = x_c\,\mathrm{rstd}$; $y = \hat{x}\odot w + b$
# ($w$, $b$ one per channel). Walking back through the same nodes, with every sum now over the batch:
#
# * $y$: passes on $g = dy \odot w$; gives $dw_j = \sum_n dy_{n,j}\hat{x}_{n,j}$ and $db_j = \sum_n dy_{n,j}$;
# * $\hat{x}$: passes on $dx_c = g\,\mathrm{rstd}$ and $d\mathrm{rstd}_j = \sum_n g_{n,j}\, x_{c;n,j}$;
# * $\mathrm{rstd}$: $dv = -\tfrac{1}{2}\mathrm{rstd}^3\, d\mathrm{rstd}$;
# * $v$: adds $\tfrac{2}{B}\, dv\, x_c$ to $dx_c$;
# * $x_c$ and $\mu$: $dx = dx_c - \frac{1}{B}\sum_n dx_{c;n}$, where the variance path's share of that
#   sum vanishes because each channel's centred values sum to zero over the batch.
#
# So $dx = \mathrm{rstd}\,(g - \overline{g}^{B} - \hat{x}\,\overline{g\hat{x}}^{B})$ with means over the
# batch: **LayerNorm's formula with the axes swapped**, because the two graphs differ only in the axis the
# statistics run along. The cell walks a batch of 5 examples and 3 channels, checks every node against
# central differences on that node alone, and checks that LayerNorm's closed-form backward applied to the
# transposed batch (rows = channels) gives BatchNorm's $dx$.

# %%
xb = rng.standard_normal((5, 3)) * [1.0, 2.0, 0.5] + [0.0, 3.0, -1.0]      # (B, C) = (5, 3)
wb, bb, dyb, eps = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal((5, 3)), 1e-5
mu = xb.mean(axis=0)                                                   # (C,): down the batch
xc = xb - mu
v = np.mean(xc ** 2, axis=0)
rstd = (v + eps) ** -0.5
x_hat = xc * rstd
g = dyb * wb
dxc, drstd = g * rstd, np.sum(g * xc, axis=0)                          # node x_hat
dv = -0.5 * rstd ** 3 * drstd                                          # node rstd
dxc = dxc + 2 / len(xb) * dv * xc                                      # node v
dx = dxc - dxc.sum(axis=0) / len(xb)                                   # nodes x_c and mu
pairs = {"x_hat": (vjp_by_differences(lambda r: xc * r, rstd, g), drstd),        # (differences, the rule)
         "rstd": (vjp_by_differences(lambda z: (z + eps) ** -0.5, v, drstd), dv),
         "v": (vjp_by_differences(lambda z: np.mean(z ** 2, axis=0), xc, dv), 2 / len(xb) * dv * xc),
         "x_c, mu": (vjp_by_differences(lambda z: z - z.mean(axis=0), xb, dxc), dx)}
node_err = {k: np.max(np.abs(num - rule)) / np.max(np.abs(rule)) for k, (num, rule) in pairs.items()}
check(max(node_err.values()) < 1e-6, "every BatchNorm node matches differences (relative)")
library = sn.batch_norm_backward(dyb, sn.batch_norm_forward(xb, wb, bb, eps=eps)[1])["x"]
swapped = sn.layer_norm_backward(g.T, sn.layer_norm_forward(xb.T, eps=eps)[1])["x"].T   # rows = channels
check(np.allclose(dx, library, rtol=1e-12, atol=1e-14) and np.allclose(dx, swapped, rtol=1e-12, atol=1e-14),
      "the walked dx is the library's BatchNorm backward, and LayerNorm's on the transposed batch")
report(lesson, "  BatchNorm nodes against central differences (relative): " + ", ".join(
    f"{k} {e:.1e}" for k, e in node_err.items()) + "; walked dx against the library "
    f"{np.max(np.abs(dx - library)):.1e}, against LayerNorm's on the transposed batch "
    f"{np.max(np.abs(dx - swapped)):.1e}")

# %% [markdown]
# ## Exercise: BatchNorm's backward, yourself
#
# Fill in `backward` in the next cell (the walk above, with the sums down the batch and, for an input with
# positions such as $(N, C, L)$, over the positions too, as BatchNorm on images does), in the exercise's
# contract: it gets the forward's inputs and returns the gradients. The cell after it checks it with
# `scratchnorm.exercises.check`, which runs it on random float64 inputs with a random upstream gradient, reports
# each gradient, and names the mistake when it recognizes one. **How to switch:** on this page (`make lessons`,
# the book) `MINE = False`, and the check runs on the library's own solution, so you see what a passing report
# looks like; in your copy of the notebook, write `backward`, set `MINE = True`, and run both cells. From a
# terminal, the same exercise: `python -m scratchnorm.exercises new batchnorm ex`, then `python -m
# scratchnorm.exercises check ex/batchnorm.py`.

# %%
MINE = False                  # True once backward below is yours


def backward(dy, x, weight, eps):
    """BatchNorm in training mode. x is (N, C) or (N, C, *positions): the check draws (6, 4), (5, 4, 3) and
    (3, 4, 2, 3). Statistics per channel, over N and the positions (axis 0 and axes 2, 3, ...); weight (C,).
    Return {"x": dL/dx (x's shape), "weight": dL/dw (C,), "bias": dL/db (C,)}."""
    raise NotImplementedError("write BatchNorm's backward here, then set MINE = True")


# %%
lesson.exercise("batchnorm", backward, mine=MINE)        # scratchnorm.exercises.check; see the text above

# %% [markdown]
# ## Questions
#
# **1.** At $B = 2$ every BatchNorm output is $+1$ or $-1$, whatever the example is. Why, and what does that
# leave of the example's own value?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"With two examples each feature's batch mean is their midpoint and its variance the squared "
              f"half-distance, so both normalize to exactly -1 and +1 (here within {np.median(1 - at2):.0e} of "
              f"1 in the median, the effect of eps): only the sign of x0 against its batch-mate survives, and "
              f"its output moves by {spread[0]:.2f} between batches.")

# %% [markdown]
# **2.** The spread over batches fell like $B$ to a power close to $-1/2$. About how large a batch would bring
# it down to 0.01, and what does that say about shrinking batch noise by growing the batch?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"The fit is {amp:.2f}/√B (slope {slope:.2f}), so a spread of 0.01 needs B ≈ ({amp:.2f}/0.01)² "
              f"≈ {(amp / 0.01) ** 2:,.0f}: every tenfold cut in the noise costs a hundredfold larger batch.")

# %% [markdown]
# **3.** Without affine, GroupNorm with $G = 1$ and LayerNorm over $(C, L)$ agree to round-off. Why can no
# choice of GroupNorm's affine parameters reproduce LayerNorm with a random per-element affine?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"They share x_hat (difference {to_ln[0]:.0e}), but GroupNorm has {2 * C} affine parameters, one "
              f"weight and bias per channel, while LayerNorm has {2 * C * L}, one per element: the {L} positions "
              f"of a channel get {L} different weights, which one per-channel weight cannot match (best fit "
              f"leaves a relative residual of {resid:.2f}).")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    "'BatchNorm's output depends on the batch, by about 1/sqrt(B)': " + lesson.result("does badly at small batch")
    + "; 'LayerNorm, RMSNorm and GroupNorm do not': " + lesson.result("do not depend on the batch") + ".",
    "BatchNorm's backward is LayerNorm's with the axes swapped: the same graph, its statistics down the batch.")

# %%
lesson.finish()
