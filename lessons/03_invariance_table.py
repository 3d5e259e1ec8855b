# %% [markdown]
# # The invariance table: the paper's Table 1, measured
#
# A linear layer $a = Wx$ feeds a normalization. The paper's Table 1 (after Ba et al. 2016) says which
# changes of the weights or of the data leave the normalized output unchanged. Here each change is
# applied, and the relative change of the whole output, $\lVert y' - y\rVert / \lVert y\rVert$, is measured:
#
# | change | what it does |
# |---|---|
# | weight matrix re-scaling | $W \to \delta W$ |
# | weight matrix re-centering | $W \to W + \mathbf{1}\gamma^\top$: every $a_i$ of a case moves by $\gamma \cdot x$ |
# | weight vector re-scaling | one row $w_i \to \delta_i w_i$ |
# | dataset re-scaling | every $x \to \delta x$ |
# | dataset re-centering | every $x \to x + \gamma$: $a_i$ moves by $w_i \cdot \gamma$, a different shift per unit |
# | single training case re-scaling | one $x \to \delta x$ |
#
# ($\delta > 0$, $\gamma$ random.)
#
# **Why the answers differ.** BatchNorm takes statistics of each unit $a_i$ over the batch, so it forgives
# anything that scales or shifts one unit the same way in every case, and nothing that treats cases
# differently. LayerNorm takes statistics of each case over its units: it forgives a common scale or a
# common shift of all units of a case. RMSNorm divides by the RMS alone,
# $y = x / \sqrt{\tfrac{1}{d}\sum_i x_i^2 + \epsilon}$, so it forgives scales but no shift; pRMSNorm takes
# that RMS from the first $k$ units, which changes none of this. Weight normalization normalizes no
# activation: the layer is $y = x W^\top$ with $W_i = g_i\, v_i / \lVert v_i \rVert$, and the "weight
# matrix" the transformations act on is $v$ (the lengths $g$ stay put). Scaling $v$, or one of its rows,
# changes no $W$; but $y$ is linear in $x$, so re-scaling the dataset scales the output by $\delta$, a
# relative change of exactly $|\delta - 1|$: that is where its "N" comes from.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numpy as np

from lessons._common import HOLDS, check, paper, start
from lessons._grading import exactly
from scratchnorm import (
    BatchNorm,
    GroupNorm,
    InstanceNorm,
    LayerNorm,
    PartialRMSNorm,
    RMSNorm,
    WeightNormLinear,
    linear_forward,
)

lesson = start(__name__, "03_invariance_table")

# %% [markdown]
# ## The measurement
#
# $W$ has no bias (a bias would break the weight re-scaling cells of every row: the paper's $a = Wx$ has
# none) and the normalizations no affine (a fixed affine after them changes the size of a change, not
# whether it is zero). Their $\epsilon$ is $10^{-300}$, which vanishes against any mean square above
# $10^{-284}$, so the layers compute the $\epsilon = 0$ formulas: an exact invariance shows as round-off,
# about $10^{-16}$, and a broken one as a change of order 0.1. A cell is "invariant" below a threshold of
# $10^{-7}$, and the lesson asserts that no measured value in any trial falls anywhere near it (all below
# $10^{-12}$ or above $10^{-2}$), so the classification cannot hinge on the threshold.
#
# Two extra rows need channels, and there the answer depends on what the channels are, so both
# constructions are measured:
#
# * **"64 units as 8 channels"**: $a = Wx$ of $D = 64$ units split into $C = 8$ channels of $L = 8$
#   positions each. GroupNorm ($G = 2$) and InstanceNorm normalize each case over subsets of its units:
#   LayerNorm's row.
# * **"1x1 conv"**: each case holds $L = 16$ positions, and the same $W$ (8 channels $\times$ 16 inputs)
#   acts at every position, $a[n, :, l] = W x[n, :, l]$ (the layout these layers are made for). Now a row
#   $w_c$ is one channel's filter, dataset re-centering shifts channel $c$ by $w_c \cdot \gamma$ at every
#   position, and $W + \mathbf{1}\gamma^\top$ shifts every channel by $\gamma \cdot x[n, :, l]$, which
#   varies with the position. InstanceNorm (one channel per group) forgives the first two and not the
#   third: BatchNorm's columns, applied to one case at a time, so it also forgives single case re-scaling.
#   GroupNorm with 4 channels per group forgives none of the three.

# %%
TINY = 1e-300                 # eps that vanishes against any mean square above 1e-284
N, N_IN, D = 16, 32, 64       # cases, inputs, units (row layouts)
C, L_RESHAPE, G = 8, 8, 2     # channels, positions per channel of the 64 units, groups
N_CONV, IN_CONV, L_CONV = 8, 16, 16
INVARIANT_BELOW = 1e-7        # the threshold; asserted: no value between 1e-12 and 1e-2

COLUMNS = ["weight matrix\nre-scaling", "weight matrix\nre-centering", "weight vector\nre-scaling",
           "dataset\nre-scaling", "dataset\nre-centering", "single training\ncase re-scaling"]
SHORT = ["W scale", "W shift", "row scale", "data scale", "data shift", "one case scale"]
# The expectation the lesson asserts: the paper's Table 1 (Y = invariant), and for the extra rows
# the predictions derived in the docstring.
PAPER_TABLE = {"BatchNorm": "YNYYYN", "WeightNorm": "YNYNNN", "LayerNorm": "YYNYNY", "RMSNorm": "YNNYNY",
               "pRMSNorm": "YNNYNY"}
DERIVED = {"GroupNorm G=2, 64 units as 8 channels": "YYNYNY", "InstanceNorm, 64 units as 8 channels": "YYNYNY",
           "GroupNorm G=2, 1x1 conv": "YNNYNY", "InstanceNorm, 1x1 conv": "YNYYYY"}


def linear(W, X):
    """a = W x for every case (and every position): X (N, in[, L]) -> a (N, out[, L])."""
    a, _ = linear_forward(np.moveaxis(X, 1, -1), W)
    return np.moveaxis(a, -1, 1)


# %% [markdown]
# Each model maps $(W, X)$ to the normalized output $y$; the six changes of Table 1 are applied to the same
# $W$ and $X$, and each change's relative effect on $y$ is recorded, over several random trials.

# %%
def models():
    """name -> (f(W, X) -> y, shape of W, shape of X)."""
    weight_norm = WeightNormLinear(N_IN, D, bias=False, backend="numpy")   # g: the lengths it starts with

    def with_v(W, X):
        weight_norm.params["weight_v"] = W
        return weight_norm.forward(X)

    def after(norm, reshape=None):
        def f(W, X):
            a = linear(W, X)
            return norm.forward(a if reshape is None else a.reshape(reshape))
        return f

    rows, conv = ((D, N_IN), (N, N_IN)), ((C, IN_CONV), (N_CONV, IN_CONV, L_CONV))
    as_channels = (N, C, L_RESHAPE)
    kw = dict(eps=TINY, backend="numpy")
    return {
        "BatchNorm": (after(BatchNorm(D, affine=False, **kw)), *rows),
        "WeightNorm": (with_v, *rows),
        "LayerNorm": (after(LayerNorm(D, elementwise_affine=False, **kw)), *rows),
        "RMSNorm": (after(RMSNorm(D, elementwise_affine=False, **kw)), *rows),
        "pRMSNorm": (after(PartialRMSNorm(D, elementwise_affine=False, **kw)), *rows),
        "GroupNorm G=2, 64 units as 8 channels": (after(GroupNorm(G, C, affine=False, **kw), as_channels), *rows),
        "InstanceNorm, 64 units as 8 channels": (after(InstanceNorm(C, **kw), as_channels), *rows),
        "GroupNorm G=2, 1x1 conv": (after(GroupNorm(G, C, affine=False, **kw)), *conv),
        "InstanceNorm, 1x1 conv": (after(InstanceNorm(C, **kw)), *conv),
    }


def scale_factor(rng):
    """delta > 0, at least a factor 1.5 away from 1."""
    return float(np.exp(rng.choice([-1, 1]) * rng.uniform(np.log(1.5), np.log(5))))


def transformations(W, X, rng):
    """The six changes of Table 1, each as (W', X'), and the delta of the dataset re-scaling."""
    per_input = (1, -1) + (1,) * (X.ndim - 2)                      # gamma along the input axis
    gamma_w = rng.standard_normal(W.shape[1]) / np.sqrt(W.shape[1])  # the size of a row of W
    row, case = rng.integers(W.shape[0]), rng.integers(X.shape[0])
    d_row, d_data, d_case = scale_factor(rng), scale_factor(rng), scale_factor(rng)
    W_row, X_case = W.copy(), X.copy()
    W_row[row] *= d_row
    X_case[case] *= d_case
    changed = [(scale_factor(rng) * W, X), (W + gamma_w[None, :], X), (W_row, X), (W, d_data * X),
               (W, X + rng.standard_normal(X.shape[1]).reshape(per_input)), (W, X_case)]
    return changed, d_data


def measure(trials, rng):
    """change[trial, row, column] = ||y' - y|| / ||y||; and WeightNorm's dataset re-scaling vs |delta - 1|."""
    table = models()
    change = np.zeros((trials, len(table), len(COLUMNS)))
    wn_err = 0.0
    for t in range(trials):
        for r, (name, (f, w_shape, x_shape)) in enumerate(table.items()):
            W = rng.standard_normal(w_shape) / np.sqrt(w_shape[1])
            X = rng.standard_normal(x_shape)
            y = f(W, X)
            changed, d_data = transformations(W, X, rng)
            for c, (W2, X2) in enumerate(changed):
                change[t, r, c] = np.linalg.norm(f(W2, X2) - y) / np.linalg.norm(y)
            if name == "WeightNorm":
                wn_err = max(wn_err, abs(change[t, r, 3] - abs(d_data - 1)))
    return list(table), change, wn_err


rng = np.random.default_rng(3)
names, change, wn_err = measure(lesson.pick(3, 30), rng)
invariant = change < INVARIANT_BELOW                          # (trials, rows, columns)
check(np.all(invariant == invariant[0]), "every trial classifies every cell the same way")
inv_max, not_min = change[invariant].max(), change[~invariant].min()
check(inv_max < 1e-12 and not_min > 1e-2, f"the two kinds of cells are far apart: invariant cells up to "
                                          f"{inv_max:.1e}, the others from {not_min:.1e}")
check(wn_err < 1e-12, "WeightNorm: dataset re-scaling by delta changes the output by exactly |delta - 1|")
measured = {name: "".join("Y" if v else "N" for v in invariant[0, r]) for r, name in enumerate(names)}
worst = np.where(invariant[0], change.max(axis=0), change.min(axis=0))    # (rows, columns), over trials
if lesson.verbose:
    print("  worst relative change over the trials, columns " + ", ".join(SHORT))
    for r, name in enumerate(names):
        print(f"  {name:<28}" + "  ".join(f"{measured[name][c]} {worst[r, c]:7.1e}" for c in range(len(COLUMNS))))

# %% [markdown]
# ## The paper's five rows, graded
#
# Each row of the paper's table is one claim: the number of its six cells where the measurement
# disagrees with the paper must be zero. The extra rows are checked against the predictions derived above.

# %%
for r, (name, row) in enumerate(PAPER_TABLE.items()):
    cells = ", ".join(f"{col.replace(chr(10), ' ')} {row[c]}" for c, col in enumerate(COLUMNS))
    got = ", ".join(f"{short} {measured[name][c]} ({worst[r, c]:.0e})" for c, short in enumerate(SHORT))
    lesson.claim(f"{name} is invariant (Y) or not (N) to: {cells}", source=paper("§4.1, Table 1"),
                 measured=f"{got} (worst relative change of {change.shape[0]} trials); value: cells unlike "
                          "the paper",
                 value=sum(m != p for m, p in zip(measured[name], row)), **exactly(0), expect=HOLDS)
for name, row in DERIVED.items():
    check(measured[name] == row, f"{name}: measured {measured[name]}, derived {row}")

# %% [markdown]
# ## The table as a picture
#
# Colour is $\log_{10}$ of the median relative change over the trials; each cell is marked invariant or
# not and labelled with that median. The first five rows are the paper's.

# %%
def heatmap(lesson, names, change, n_paper):
    med = np.median(change, axis=0)
    shown = np.log10(np.maximum(med, 1e-17))
    fig, ax = plt.subplots(figsize=(12.5, 7.2), layout="constrained")
    im = ax.imshow(shown, cmap="viridis", vmin=-17, vmax=0.5, aspect="auto")
    for (r, c), v in np.ndenumerate(med):
        inv = v < INVARIANT_BELOW
        ax.text(c, r, f"invariant\n{v:.0e}" if inv else f"NOT invariant\n{v:.2f}", ha="center", va="center",
                fontsize=9, color="white" if inv else "black", fontweight="normal" if inv else "bold")
    ax.axhline(n_paper - 0.5, color="white", linewidth=4)
    ax.set_xticks(range(len(COLUMNS)), COLUMNS, fontsize=10)
    ax.set_yticks(range(len(names)), names, fontsize=10)
    ax.tick_params(top=True, labeltop=True, bottom=False, labelbottom=False)
    ax.grid(False)
    bar = fig.colorbar(im, ax=ax, shrink=0.9,
                       label="log10 of the relative output change ‖y′ − y‖ / ‖y‖ (median over trials)")
    bar.ax.axhline(np.log10(INVARIANT_BELOW), color="red", linewidth=2)      # the threshold
    ax.set_title(f"Table 1, measured (a = Wx, eps = 1e-300, {change.shape[0]} random trials; invariant means "
                 f"below {INVARIANT_BELOW:g}, the red mark on the colour bar).\nAbove the white line the paper's "
                 "five rows; below, GroupNorm and InstanceNorm in two layouts", fontsize=11)
    lesson.save(fig, "heatmap")


heatmap(lesson, names, change, len(PAPER_TABLE))

# %% [markdown]
# ## Questions
#
# **1.** LayerNorm forgives the weight matrix re-centering $W \to W + \mathbf{1}\gamma^\top$, RMSNorm does
# not. What does the shift do to one case's units, and which statistic removes it?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
r_ln, r_rms = names.index("LayerNorm"), names.index("RMSNorm")
lesson.answer(f"It adds the same number, gamma . x, to every unit of the case. LayerNorm subtracts the case's "
              f"mean, which absorbs it exactly (worst change {worst[r_ln, 1]:.0e}, round-off); RMSNorm only "
              f"divides by the RMS, which the shift changes (smallest change {worst[r_rms, 1]:.2f}).")

# %% [markdown]
# **2.** Weight normalization is "not invariant" to dataset re-scaling, yet its output changes in a
# perfectly predictable way. By how much, and why is that still an N in the table?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"By exactly |delta - 1| relative to the output (deviation from that prediction at most "
              f"{wn_err:.0e} over {change.shape[0]} trials): y = x W^T is linear in x, so the output scales "
              "with the data. Invariance asks for no change at all, and a factor delta is a change.")

# %% [markdown]
# **3.** In the "1x1 conv" layout InstanceNorm forgives dataset re-centering, and GroupNorm with 4
# channels per group does not. What makes the group the deciding unit?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
r_in, r_gn = names.index("InstanceNorm, 1x1 conv"), names.index("GroupNorm G=2, 1x1 conv")
lesson.answer(f"A change is forgiven when it scales or shifts every element of a normalized group by one "
              f"number. Re-centering the data shifts each channel by its own w_c . gamma: one channel per "
              f"group (InstanceNorm) absorbs it (worst {worst[r_in, 4]:.0e}), four channels with different "
              f"shifts in one group (GroupNorm) do not (smallest {worst[r_gn, 4]:.2f}).")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    f"The paper's Table 1 holds cell by cell: every change measured is below {inv_max:.0e} (invariant) or above "
    f"{not_min:.0e} (not).",
    "LayerNorm is invariant to re-centering the weight matrix and RMSNorm is not: that is what the mean "
    "subtraction buys, and what RMSNorm gives up.")

# %%
lesson.finish()
