# %% [markdown]
# # Gated RMSNorm: a SiLU gate before or after the norm (Mamba 2, Qwen3-Next).
#
# State-space and linear-attention blocks end with a norm that has a second input, a gate $z$ computed from
# the same tokens by its own projection, and $s = \mathrm{silu}(z) = z\,\sigma(z)$ scales the output
# elementwise (`scratchnorm.GatedRMSNorm`; the math and the derivation are in `scratchnorm/gated_rmsnorm.py`,
# the kernel in `scratchnorm/fast/gated_rmsnorm.py`). The models disagree on the order:
#
# $$
# \text{gate first (Mamba 2, Bamba, Falcon-H1, Nemotron-H):}\quad y = \mathrm{RMSNorm}(x \odot s)\odot w,
# \qquad
# \text{norm first (Qwen3-Next):}\quad y = \mathrm{RMSNorm}(x)\odot w \odot s .
# $$
#
# The backward follows from the product rule and RMSNorm's own backward ($u = x \odot s$ is what the norm
# sees in the first order, $\mathrm{silu}'(z) = \sigma(z)\,(1 + z\,(1 - \sigma(z)))$):
#
# $$
# \text{gate first:}\quad du = \mathrm{RMSNorm}^{\top}(dy),\;\; dx = du \odot s,\;\;
# dz = du \odot x \odot \mathrm{silu}'(z);
# \qquad
# \text{norm first:}\quad dx = \mathrm{RMSNorm}^{\top}(dy \odot s),\;\; dz = dy \odot n \odot \mathrm{silu}'(z),
# $$
#
# with $n = \mathrm{RMSNorm}(x) \odot w$. This lesson checks the derivation, then measures what the order
# changes: who sets the size of the output.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numpy as np

import scratchnorm as sn
from scratchnorm.gated_rmsnorm import silu_and_slope
from scratchnorm.gradcheck.cases import GatedPair
from lessons._common import COMMON, HOLDS, check, start
from lessons._training import report
from lessons._grading import above, below

lesson = start(__name__, "21_gated_rmsnorm")
MODELS = f"{COMMON} (mamba_ssm's RMSNormGated; Hugging Face's MambaRMSNormGated, Qwen3NextRMSNormGated)"

# %% [markdown]
# ## The derivation, against finite differences
#
# `scratchnorm.gradcheck` compares every analytic gradient (of $x$, the gate and the weight, stacked as one
# input) with central differences in float64, for a random upstream gradient, in both orders and on both
# backends. The value is the largest relative error.

# %%
rng = np.random.default_rng(1)
reports = {}
for nbg in (False, True):
    for backend in ("numpy", "numba"):
        layer = GatedPair(16, norm_before_gate=nbg, num_groups=2, backend=backend)   # input: x and z stacked
        layer.params["weight"] = 1 + 0.3 * rng.standard_normal(16)
        reports[nbg, backend] = sn.gradcheck(layer, rng.standard_normal((2, 4, 16)))
worst = max(r.max_rel_err for r in reports.values())
for (nbg, b), r in reports.items():
    report(lesson, f"  norm_before_gate={nbg}, {b}: max relative error {r.max_rel_err:.1e}")
lesson.claim("The hand-derived backward of gated RMSNorm (the gate's gradient included) is the gradient, in both "
             "orders", source=MODELS,
             measured=f"largest relative error against central differences, both orders and backends: {worst:.1e}",
             value=worst, **below(1e-6, approx=1e-4), expect=HOLDS)

# %% [markdown]
# ## Who sets the size of the output
#
# Rows of $d$ = 64 features, the gate $z = c \cdot \mathcal{N}(0, 1)$ for scales $c$ from 0.3 to 10, weight 1.
# Gate first, the norm comes last, so the output's RMS is 1 whatever the gate: the gate can only change the
# mix of features, never the total. Norm first, the gate multiplies a normalized row, so its size passes
# through to the output. The cell prints the output's RMS (median over rows) per scale and order.

# %%
rng = np.random.default_rng(0)
scales = np.geomspace(0.3, 10, lesson.pick(8, 24))
x = rng.standard_normal((lesson.pick(256, 4096), 64))
noise = rng.standard_normal(x.shape)
rms = {nbg: [] for nbg in (False, True)}
for c in scales:
    for nbg in (False, True):
        y, _ = sn.gated_rms_norm_forward(x, c * noise, norm_before_gate=nbg)
        rms[nbg].append(float(np.median(np.sqrt((y * y).mean(-1)))))
check(all(np.isfinite(v).all() for v in rms.values()), "the RMS values are finite")
off = max(abs(v - 1.0) for v in rms[False])
spread = rms[True][-1] / rms[True][0]
report(lesson, "  gate first: " + ", ".join(f"{v:.4f}" for v in rms[False]))
report(lesson, "  norm first: " + ", ".join(f"{v:.3f}" for v in rms[True]))
lesson.claim("Gate before the norm (Mamba 2): the output's RMS is 1 (times the weight) whatever the size of the "
             "gate", source=MODELS,
             measured=f"median RMS of y per row, gate scales {scales[0]:.1f} to {scales[-1]:.0f}: largest distance "
                      f"from 1 {off:.1e}", value=off, **below(1e-3, approx=1e-2), expect=HOLDS)
lesson.claim("Gate after the norm (Qwen3-Next): the gate sets the output's size", source=MODELS,
             measured=f"median RMS of y at gate scale {scales[-1]:.0f} over that at {scales[0]:.1f}: {spread:.1f}",
             value=spread, **above(10.0, approx=3.0), expect=HOLDS)

# %% [markdown]
# ## What the gate's gradient cannot see
#
# Gate first, $y$ does not change when every $s_j$ is multiplied by the same $c > 0$ (RMSNorm is
# scale-invariant for $\epsilon = 0$). So the gradient has no component along that change:
# $\sum_j dz_j\, s_j / \mathrm{silu}'(z_j) = \sum_j du_j\, u_j = 0$ per row, the gated twin of RMSNorm's
# $dx \cdot x = 0$. The value is the largest $|\sum_j du_j u_j|$ over $\sum_j |du_j u_j|$ across rows.

# %%
z = 2 * noise[:64]
_, cache = sn.gated_rms_norm_forward(x[:64], z, eps=0.0)
dz = sn.gated_rms_norm_backward(rng.standard_normal(z.shape), cache)["gate"]
s, slope = silu_and_slope(z)
along = dz * s / slope                                           # du_j u_j, from the gate's gradient
ratio = float(np.max(np.abs(along.sum(-1)) / np.abs(along).sum(-1)))
lesson.claim("Gate before the norm: the gate's gradient is orthogonal to a common rescaling of the gate "
             "(sum_j du_j u_j = 0 per row, eps = 0)", source=MODELS,
             measured=f"largest |sum du u| / sum |du u| over 64 rows: {ratio:.1e}", value=ratio,
             **below(1e-12, approx=1e-8), expect=HOLDS)

# %%
fig, ax = plt.subplots(figsize=(6.4, 4.2))
ax.loglog(scales, rms[False], "o-", label="gate first: RMSNorm(x * silu(z))  (Mamba 2)")
ax.loglog(scales, rms[True], "s--", label="norm first: RMSNorm(x) * silu(z)  (Qwen3-Next)")
ax.set(xlabel="gate scale c  (z = c * N(0, 1))", ylabel="RMS of the output (median over rows)",
       title="who sets the size of the output")
ax.legend(fontsize=8)
lesson.save(fig, "order")

# %% [markdown]
# ## Questions
#
# **1.** In the gate-first order, can the gate switch a whole row off?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer("Not by being small everywhere: a common factor on the gate cancels in the norm (the output's RMS "
              f"stayed within {off:.1e} of 1 from c = {scales[0]:.1f} to {scales[-1]:.0f}). Only eps stops it: "
              "once mean((x s)^2) falls below eps the row shrinks, and silu(0) = 0 gives a zero row.")

# %% [markdown]
# **2.** Why does the gate's gradient in the gate-first order carry a sum over the row, when
# $s_j$ depends on $z_j$ alone?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer("Because du, RMSNorm's backward of dy, already holds the sum through mean(u^2): dz_j = du_j x_j "
              f"silu'(z_j) inherits it. The last cell saw its consequence, sum du u = 0 to {ratio:.0e}.")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    "'Gated RMSNorm's hand-derived backward, the gate's gradient included, is the gradient': "
    + lesson.result("hand-derived backward") + ".",
    "Where the gate goes decides what the norm controls: 'gate before the norm, the output's RMS is 1': "
    + lesson.result("Gate before the norm (Mamba 2)") + "; 'gate after, the gate sets the size': "
    + lesson.result("Gate after the norm") + ".")

# %%
lesson.finish()
