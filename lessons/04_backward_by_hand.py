# %% [markdown]
# # Backward by hand: the gradients and Jacobians of LayerNorm and RMSNorm.
#
# The backward of a normalization is the chain rule walked backwards through a small graph. This lesson
# walks it node by node for both layers, checks every node's local derivative numerically on that node
# alone, simplifies the result to the closed form the library computes, and then looks at what the
# Jacobians remove. Notation: $\overline{v} = \frac{1}{d}\sum_i v_i$, one row of $d$ features, and
# $g = \partial L/\partial \hat{x} = dy \odot w$ (the weight).

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import numpy as np

import scratchnorm as sn
from lessons._backward_plots import plot_grad_noise, plot_gradcheck, plot_jacobians
from lessons._common import COMMON, HOLDS, VERDICTS, check, explainer, paper, start
from lessons._differences import vjp_by_differences
from lessons._grading import above, below
from lessons._stats import first_crossing, mean_interval
from lessons._training import interval, report
from scratchnorm.gradcheck.cases import all_cases

lesson = start(__name__, "04_backward_by_hand")
rng_walk = np.random.default_rng(40)

# %% [markdown]
# ## LayerNorm's graph, node by node
#
# Forward, one row: $\mu = \overline{x}$; $x_c = x - \mu$; $v = \overline{x_c^2}$;
# $\mathrm{rstd} = (v + \epsilon)^{-1/2}$; $\hat{x} = x_c\, \mathrm{rstd}$; $y = \hat{x} \odot w + b$.
# Backward, from the output to the input; each line is a node's local derivative times the gradient it
# receives, and what it passes on:
#
# * $y = \hat{x} \odot w + b$: local derivative $\partial y_i/\partial \hat{x}_i = w_i$; receives $dy$;
#   passes on $d\hat{x} = g$, and gives $dw = dy \odot \hat{x}$, $db = dy$ (summed over rows).
# * $\hat{x} = x_c\,\mathrm{rstd}$: $\partial \hat{x}_i/\partial x_{c,i} = \mathrm{rstd}$ and
#   $\partial \hat{x}_i/\partial\,\mathrm{rstd} = x_{c,i}$; receives $g$; passes on
#   $dx_c = g\,\mathrm{rstd}$ and $d\mathrm{rstd} = \sum_i g_i x_{c,i}$.
# * $\mathrm{rstd} = (v + \epsilon)^{-1/2}$: $-\tfrac{1}{2}(v + \epsilon)^{-3/2} = -\tfrac{1}{2}\mathrm{rstd}^3$;
#   receives $d\mathrm{rstd}$; passes on $dv = -\tfrac{1}{2}\mathrm{rstd}^3\, d\mathrm{rstd}$.
# * $v = \overline{x_c^2}$: $\partial v/\partial x_{c,i} = 2x_{c,i}/d$; receives $dv$; adds
#   $\tfrac{2}{d}\, dv\, x_c$ to $dx_c$.
# * $x_c = x - \mu$: $\partial x_{c,i}/\partial x_j = \delta_{ij}$ and $\partial x_{c,i}/\partial\mu = -1$;
#   receives $dx_c$; passes on $dx = dx_c$ and $d\mu = -\sum_i dx_{c,i}$.
# * $\mu = \overline{x}$: $\partial\mu/\partial x_j = 1/d$; receives $d\mu$; adds $d\mu/d$ to every $dx_j$.
#
# The next cell runs each node forward on one row, applies its rule, and checks the rule against central
# differences of that node alone (`vjp_by_differences` in `lessons/_differences.py`: the gradient it passes
# on, computed as $\sum_i \mathrm{received}_i\, (f_i(z + h e_j) - f_i(z - h e_j))/2h$ for each input $z_j$).

# %%
x1, w1, b1, dy1, eps = rng_walk.standard_normal(6) + 0.7, *rng_walk.standard_normal((3, 6)), 1e-5
mu = x1.mean()
xc = x1 - mu
v = np.mean(xc ** 2)
rstd = (v + eps) ** -0.5
x_hat1 = xc * rstd
g = dy1 * w1                                                           # node y: dx_hat
node_err = {"y": vjp_by_differences(lambda z: z * w1 + b1, x_hat1, dy1) - g}
dxc = g * rstd                                                         # node x_hat, its x_c input
drstd = np.sum(g * xc)                                                 # ... and its rstd input
node_err["x_hat"] = np.r_[vjp_by_differences(lambda z: z * rstd, xc, g) - dxc,
                          vjp_by_differences(lambda r: xc * r, np.array(rstd), g) - drstd]
dv = -0.5 * rstd ** 3 * drstd                                          # node rstd
node_err["rstd"] = vjp_by_differences(lambda z: (z + eps) ** -0.5, np.array(v), drstd) - dv
dxc_v = 2 / len(x1) * dv * xc                                          # node v
node_err["v"] = vjp_by_differences(lambda z: np.mean(z ** 2), xc, dv) - dxc_v
dxc = dxc + dxc_v
dx, dmu = dxc, -np.sum(dxc)                                            # node x_c
node_err["x_c"] = np.r_[vjp_by_differences(lambda z: z - mu, x1, dxc) - dx,
                        vjp_by_differences(lambda m: x1 - m, np.array(mu), dxc) - dmu]
dx = dx + dmu / len(x1)                                                # node mu
node_err["mu"] = vjp_by_differences(lambda z: np.full(6, z.mean()), x1, np.full(6, dmu / 6)) - dmu / 6
for node, err in node_err.items():
    check(np.max(np.abs(err)) < 1e-8, f"LayerNorm node {node}: the rule matches differences on the node")
    report(lesson, f"  node {node:6s}: rule against central differences, max |difference| {np.max(np.abs(err)):.1e}")

# %% [markdown]
# ## Simplifying: which terms vanish, and why
#
# Add the paths up. The mean's path carries $d\mu = -\sum_i dx_{c,i} = -\mathrm{rstd}\sum_i g_i -
# \tfrac{2}{d}dv\sum_i x_{c,i}$, and the second term **vanishes because $\sum_i (x_i - \mu) = 0$**: the
# centred row sums to zero. What is left of the mean's path is $-\mathrm{rstd}\,\overline{g}$. The variance
# path gives $\tfrac{2}{d}dv\,x_c = -\tfrac{1}{d}\mathrm{rstd}^3 (\sum_j g_j x_{c,j})\, x_c =
# -\mathrm{rstd}\,\hat{x}\,\overline{g\hat{x}}$, since $x_c\,\mathrm{rstd} = \hat{x}$. So
#
# $$
# dx = \mathrm{rstd}\,\bigl(g - \overline{g} - \hat{x}\,\overline{g \odot \hat{x}}\bigr).
# $$
#
# RMSNorm's graph is the same without $\mu$ and $x_c$ ($\mathrm{ms} = \overline{x^2}$ in place of $v$),
# so there is no $\overline{g}$ term: $dx = \mathrm{rstd}\,(g - \hat{x}\,\overline{g \odot \hat{x}})$.
# Written as a matrix, $dx = R\,g$ with $R = \mathrm{rstd}\,(I - \tfrac{1}{d}\hat{x}\hat{x}^\top)$: the
# paper's $R$ (§4.2). Because $\tfrac{1}{d}\hat{x}\cdot\hat{x} = \mathrm{ms}/(\mathrm{ms} + \epsilon)$, which is
# 1 at $\epsilon = 0$, $R$ is $\mathrm{rstd}$ times a projection: it removes the direction $\hat{x}$, and
# LayerNorm's Jacobian also removes $\mathbf{1}$. The cell checks the walked $dx$ against the closed form,
# and walks RMSNorm's graph (its nodes are LayerNorm's, checked above) to compare with $R g$.

# %%
closed = rstd * (g - g.mean() - x_hat1 * np.mean(g * x_hat1))
check(np.allclose(dx, closed, rtol=1e-12, atol=1e-14), "the walked LayerNorm dx is the closed form")
ms = np.mean(x1 ** 2)
rstd_r = (ms + eps) ** -0.5
drstd_r = np.sum(g * x1)                                               # node x_hat = x rstd: the rstd input
dms = -0.5 * rstd_r ** 3 * drstd_r                                     # node rstd (LayerNorm's, checked)
dx_r = g * rstd_r + 2 / len(x1) * dms * x1                             # node x_hat's x input + node ms
R = rstd_r * (np.eye(6) - np.outer(x1 * rstd_r, x1 * rstd_r) / 6)     # the paper's R (with eps: x_hat = x rstd)
check(np.allclose(dx_r, R @ g, rtol=1e-12), "the walked RMSNorm dx is R g")
report(lesson, f"  LayerNorm: walked dx against the closed form, max |difference| "
               f"{np.max(np.abs(dx - closed)):.1e}; RMSNorm: walked dx against R g {np.max(np.abs(dx_r - R @ g)):.1e}")

# %% [markdown]
# ## The closed forms against the chain rule
#
# `staged_vs_closed` compares the closed-form backward with the node-by-node one on the same cache, for $dx$
# and the parameters' gradients, on rows with a nonzero mean.

# %%
def rel_diff(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def cosine(a, b):
    return np.abs(np.sum(a * b, axis=-1)) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def staged_vs_closed(lesson, rng, d):
    x = rng.standard_normal((lesson.pick(64, 512), d)) + 0.7
    w, b, dy = rng.standard_normal(d), rng.standard_normal(d), rng.standard_normal(x.shape)
    _, c_ln = sn.layer_norm_forward(x, w, b)
    _, c_rms = sn.rms_norm_forward(x, w)
    err_ln = max(rel_diff(sn.layer_norm_backward(dy, c_ln)[k], sn.layer_norm_backward_staged(dy, c_ln)[k])
                 for k in ("x", "weight", "bias"))
    err_rms = max(rel_diff(sn.rms_norm_backward(dy, c_rms)[k], sn.rms_norm_backward_staged(dy, c_rms)[k])
                  for k in ("x", "weight"))
    lesson.claim("LayerNorm's closed-form backward rstd(g − mean g − x̂ mean(g x̂)) equals the chain rule "
                 "node by node", source=COMMON, measured=f"max relative difference {err_ln:.1e}",
                 value=err_ln, **below(1e-12, approx=1e-6), expect=HOLDS)
    lesson.claim("RMSNorm's backward is R applied to g: rstd(g − x̂ mean(g x̂)) equals the chain rule node by node",
                 source=paper("§4.2"), measured=f"max relative difference {err_rms:.1e}",
                 value=err_rms, **below(1e-12, approx=1e-6), expect=HOLDS)


rng, d = np.random.default_rng(4), 32
staged_vs_closed(lesson, rng, d)

# %% [markdown]
# ## The Jacobians
#
# The cell builds both Jacobians at one input of $d = 12$ features with $\epsilon = 0$, and what each sends the
# directions it should remove to. The figure (`lessons/_backward_plots.py`): $J - \mathrm{rstd}\,I$ (what each
# Jacobian removes: $\hat{x}\hat{x}^\top/d$, and for LayerNorm also $\mathbf{1}\mathbf{1}^\top/d$) and the
# singular values: one (RMSNorm) or two (LayerNorm) are zero to round-off.

# %%
a = np.sort(rng.standard_normal(12)) + 0.8          # (12,); sorted: x_hat x_hat^T shows as a smooth pattern
J_rms, J_ln = sn.rms_norm_jacobian(a), sn.layer_norm_jacobian(a)      # (12, 12) each, eps = 0
s_rms, s_ln = np.linalg.svd(J_rms, compute_uv=False), np.linalg.svd(J_ln, compute_uv=False)
null_rms = np.linalg.norm(J_rms @ a) / np.linalg.norm(a)                                   # |R x| / |x|
null_ln = max(np.linalg.norm(J_ln @ np.ones(12)), np.linalg.norm(J_ln @ ((a - a.mean()) / a.std()))) / np.sqrt(12)
check(np.allclose(J_rms, J_rms.T) and np.allclose(J_ln, J_ln.T), "both Jacobians are symmetric")
check(s_rms[-2] > 1e-3 * s_rms[0] and s_ln[-3] > 1e-3 * s_ln[0], "no other direction is removed")
plot_jacobians(lesson, a, J_rms, J_ln, s_rms, s_ln)

# %% [markdown]
# The ranks are graded with those singular values, and the directions removed with the library's backward on
# many rows ($\epsilon = 0$, a random $dy$): the cosine of $dx$ with $x$ (RMSNorm), and with $\mathbf{1}$ and
# $\hat{x}$ (LayerNorm), must vanish.

# %%
x = rng.standard_normal((lesson.pick(200, 2000), d)) + 0.5
dy = rng.standard_normal(x.shape)
dx_rms = sn.rms_norm_backward(dy, sn.rms_norm_forward(x, eps=0.0)[1])["x"]
dx_ln = sn.layer_norm_backward(dy, sn.layer_norm_forward(x, eps=0.0)[1])["x"]
x_hat = sn.layer_norm_forward(x, eps=0.0)[0]
cos_rms = cosine(dx_rms, x).max()
cos_ln = max(cosine(dx_ln, np.ones(d)).max(), cosine(dx_ln, x_hat).max())
lesson.claim("RMSNorm's Jacobian R has rank d − 1: it removes x, so dx ⟂ x", source=paper("§4.2"),
             measured=f"smallest/largest singular value {s_rms[-1] / s_rms[0]:.1e} (next "
                      f"{s_rms[-2] / s_rms[0]:.2f}); |R x|/|x| = {null_rms:.1e}; max |cos(dx, x)| = {cos_rms:.1e}",
             value=max(s_rms[-1] / s_rms[0], cos_rms), **below(1e-12, approx=1e-6), expect=HOLDS)
lesson.claim("LayerNorm's Jacobian has rank d − 2: it removes 1 and x̂, so sum(dx) = 0 and dx ⟂ x̂",
             source=COMMON, measured=f"two smallest/largest singular values {s_ln[-2] / s_ln[0]:.1e}, "
                                     f"{s_ln[-1] / s_ln[0]:.1e}; max |cos(dx, 1)|, |cos(dx, x̂)| = {cos_ln:.1e}",
             value=max(s_ln[-2] / s_ln[0], cos_ln, null_ln), **below(1e-12, approx=1e-6), expect=HOLDS)

# %% [markdown]
# ## Is RMSNorm's gradient "more stable"?
#
# An explainer claims RMSNorm's gradient is "more stable", without the noise of the mean. The mean of one row
# is computed exactly from that row: it carries no sampling noise. With a random upstream gradient the size of
# $dx$ differs only by deterministic factors, set by the Jacobians' ranks and by the row's mean $m$ against its
# std $s$ (question 2 asks for the one at zero mean), and its relative spread over rows is the same for both:
# the next cell checks that; it is fixed by the algebra, not a claim that could come out either way.

# %%
# Gradient size and spread against the input's mean.
z = rng.standard_normal((lesson.pick(500, 5000), d))
z = (z - z.mean(axis=1, keepdims=True)) / z.std(axis=1, keepdims=True)   # mean 0, std 1
dy = rng.standard_normal(z.shape)
ratios = np.linspace(0, 8, 17)
size = {"RMSNorm": [], "LayerNorm": []}
for m in ratios:
    dxs = {"RMSNorm": sn.rms_norm_backward(dy, sn.rms_norm_forward(z + m)[1])["x"],
           "LayerNorm": sn.layer_norm_backward(dy, sn.layer_norm_forward(z + m)[1])["x"]}
    for name, dx in dxs.items():
        norms = np.linalg.norm(dx, axis=1)                # std(x) = 1, so this is ||dx|| * std
        size[name].append((norms.mean(), norms.std()))
size = {k: np.array(v) for k, v in size.items()}
ratio0 = size["RMSNorm"][0, 0] / size["LayerNorm"][0, 0]
spread = {k: v[:, 1] / v[:, 0] for k, v in size.items()}   # relative spread over rows, per mean
less_noise = 1 - spread["RMSNorm"].mean() / spread["LayerNorm"].mean()
shrink = size["RMSNorm"][:, 0] / size["LayerNorm"][:, 0] / ratio0      # relative to mean 0
check(np.allclose(shrink, 1 / np.sqrt(1 + ratios**2), rtol=0.02), "RMSNorm's dx shrinks as std/RMS")
check(abs(less_noise) < 0.05, "with dy ~ N(0, I) the relative spread of ||dx|| is the same for both norms")

# %% [markdown]
# What the claim can mean is the noise an optimizer sees: how much the weight gradient $\partial L/\partial W$
# changes from minibatch to minibatch, for one layer normalized by LayerNorm or RMSNorm. The model, in the next
# cell: hidden states $h = \mathrm{ReLU}(uA)$, the features of a ReLU layer ($n$ examples of $d_{in} = 48$,
# positive), then
#
# $$a = hW \;(B, d), \qquad y = \mathrm{Norm}(a) \;(B, d), \qquad
#   L = \frac{1}{B}\sum_b \tfrac{1}{2}\,(y_b \cdot r - t_b)^2 ,$$
#
# with $d = 64$, no affine, a fixed readout $r$ and targets $t$ from a fixed teacher ($\tanh$ of a random
# projection of $u$). The readout is *centred*, $\sum_i r_i = 0$, and the reason is the whole difference between
# the norms. Write a row as $a = m\mathbf{1} + s\,\hat{x}$ with $m$ its mean, $s$ its std and $\hat{x}$ its
# LayerNorm output; then, at $\epsilon = 0$,
#
# $$\mathrm{RMSNorm}(a) = \frac{\hat{x} + q\mathbf{1}}{\sqrt{1 + q^2}}, \qquad q = m/s .$$
#
# RMSNorm keeps the common part $q\mathbf{1}$, and a readout with $\sum_i r_i \ne 0$ turns it into
# $q\sum_i r_i/\sqrt{1+q^2}$, a residual that the readout, not the norm, puts into every example: it adds a
# part that every minibatch's gradient shares, which inflates $\lVert G\rVert^2$ and makes RMSNorm look less
# noisy for a reason that has nothing to do with the noise of a mean. A centred readout sees only
# $\hat{x}\cdot r$, and leaves LayerNorm's loss exactly unchanged ($\hat{x}$ sums to 0). At fixed parameters
# each minibatch $b$ of $B = 32$ consecutive rows gives a gradient
# $G_b = \partial L/\partial W = h_b^\top\, \partial L/\partial a$, and its noise is measured as
#
# $$\mathrm{NSR} = \frac{\overline{\lVert G_b - G\rVert^2}}{\lVert G\rVert^2}, \qquad G = \overline{G_b}
#   \quad\text{(means over the minibatches)},$$
#
# the quantity that decides how much an SGD step wanders. Both norms see the same minibatches, $W$, $r$ and
# $t$: the comparison is paired.

# %%
NORMS = {"LayerNorm": (sn.layer_norm_forward, sn.layer_norm_backward),
         "RMSNorm": (sn.rms_norm_forward, sn.rms_norm_backward)}


def layer(seed, n, d_in=48, d=64):
    """One seed's data and zero-mean weights: h (n, d_in), W0 (d_in, d), readout r (d,), targets t (n,)."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((n, d_in))
    h = np.maximum(u @ rng.standard_normal((d_in, d_in)) / np.sqrt(d_in), 0.0)   # ReLU features, mean > 0
    W0 = rng.standard_normal((d_in, d)) / np.sqrt(d_in)                           # entries N(0, 1/d_in)
    r = rng.standard_normal(d) / np.sqrt(d)
    r -= r.mean()                                                                 # centred: sum(r) = 0
    t = np.tanh(u @ rng.standard_normal(d_in) / np.sqrt(d_in))                    # a teacher's targets
    return h, W0, r, t


def noise_to_signal(forward, backward, h, W, r, t, batch=32):
    """NSR of dL/dW over the consecutive minibatches of ``batch`` rows of h."""
    G = []
    for s in range(0, len(h) - batch + 1, batch):
        hb, tb = h[s:s + batch], t[s:s + batch]                  # (B, d_in), (B,)
        y, cache = forward(hb @ W, eps=1e-5)                     # y = Norm(a), a = h W: (B, d)
        dy = np.outer(y @ r - tb, r) / batch                     # dL/dy, (B, d)
        G.append(hb.T @ backward(dy, cache)["x"])                # dL/dW = h^T dL/da, (d_in, d)
    G = np.array(G)                                              # (minibatches, d_in, d)
    return float(np.mean(np.sum((G - G.mean(axis=0)) ** 2, axis=(1, 2))) / np.sum(G.mean(axis=0) ** 2))


def mean_over_std(a):
    """The row mean over the row std of a (n, d), averaged over the rows."""
    return float(np.mean(a.mean(axis=1) / a.std(axis=1)))


# %% [markdown]
# The hidden states $h$ are positive, but that mean does not reach the vector the norm sees: with zero-mean
# random weights ($W_0$, entries $\mathcal{N}(0, 1/d_{in})$) each unit of $a$ gets its own offset, and $a$'s row
# mean is small against its row spread. So the lesson gives $a$ a real row mean the way the paper's "shift of
# the weight matrix" does: every weight is raised by a common amount $c$ in units of the weights' std,
# $W = W_0 + c/\sqrt{d_{in}}$, which adds $c \sum_i h_i / \sqrt{d_{in}}$ to every unit of a row. The row mean
# over the row std of $a$ itself is the dose. The cell measures the noise-to-signal ratio of both norms over a
# range of $c$, for many seeds (a seed draws $u$, $A$, $W_0$, $r$ and the teacher), and takes the paired ratio
# RMSNorm/LayerNorm per seed. At $c = 0$ the row mean is near 0 and the two norms nearly coincide: a check,
# not a claim. The claim is read off the curve: the dose at which LayerNorm's gradient noise falls 10% below
# RMSNorm's (the paired ratio reaches $1/0.9$), found on each seed's curve by interpolation, and its 95%
# interval over the seeds. "RMSNorm is more stable" would hold if re-centring paid only for rows whose mean
# is at least twice their spread (approximately: at least their spread); an interval wholly below 1 says
# re-centring pays already on rows whose mean is smaller than their spread. The figure: the noise-to-signal
# ratio of each norm against $a$'s row mean/std (the geometric mean over seeds, its 95% interval shaded), and
# the paired ratio with the crossing and its interval. LayerNorm's line is flat by construction: it removes
# the common shift, output and gradient alike. The seeds differ more from each other than the norms do within
# a seed, which is why the comparison is paired: the right panel is the evidence.

# %%
seeds, n = range(lesson.pick(3, 24)), lesson.pick(1024, 4096)
shifts = (0.0, 0.04, 0.08, 0.12, 0.16, 0.2, 0.25, 0.35, 0.5, 0.75, 1.0)          # c, in stds of the weights
nsr = {name: np.zeros((len(seeds), len(shifts))) for name in NORMS}      # (seeds, shifts) per norm
a_ratio, h_ratio = np.zeros((len(seeds), len(shifts))), np.zeros(len(seeds))
for i, seed in enumerate(seeds):
    h, W0, r, t = layer(seed, n)
    h_ratio[i] = mean_over_std(h)
    for k, c in enumerate(shifts):
        W = W0 + c / np.sqrt(W0.shape[0])                                # every weight raised by c stds
        a_ratio[i, k] = mean_over_std(h @ W)                             # the normalized vector's row mean/std
        for name, (forward, backward) in NORMS.items():
            nsr[name][i, k] = noise_to_signal(forward, backward, h, W, r, t)
log_ratio = np.log(nsr["RMSNorm"] / nsr["LayerNorm"])                    # (seeds, shifts), paired per seed
paired_ratio = np.exp([mean_interval(log_ratio[:, k]) for k in range(len(shifts))])  # (shifts, 3)
check(abs(a_ratio[:, 0].mean()) < 0.5 < 2 < a_ratio[:, -1].mean(), "a = hW: a small row mean at c = 0, a large at 1")
check(abs(np.log(paired_ratio[0, 0])) < 0.02, "at zero-mean weights the two norms' gradient noise coincides")
LEVEL = 1 / 0.9                                                          # LayerNorm 10% less noisy
pays = [first_crossing(a_ratio[i], log_ratio[i], np.log(LEVEL)) for i in range(len(seeds))]   # per seed
check(np.all(np.isfinite(pays)), "every seed's curve crosses the bound within the doses measured")
at = mean_interval(pays)
lesson.claim("RMSNorm's gradients are more stable: free of the noise the mean brings (the row mean/std at which "
             "re-centring starts to pay)", source=explainer("000", "§8.1"),
             measured=f"noise-to-signal ratio of dL/dW over minibatches of 32, RMSNorm/LayerNorm paired per seed, "
                      f"over {len(shifts)} common weights c = 0 to {shifts[-1]:g} std (a = hW's row mean/std "
                      f"{a_ratio[:, 0].mean():.2f} to {a_ratio[:, -1].mean():.2f}; the ReLU features h themselves "
                      f"{h_ratio.mean():.2f}): at c = 0 {paired_ratio[0, 0]:.3f}, at the largest "
                      f"{paired_ratio[-1, 0]:.2f}. The row mean/std at which it reaches 1/0.9 (LayerNorm 10% less "
                      f"noisy): {interval(*at, fmt='{:.2f}', n=len(seeds))} (holds if at least 2)",
             value=at[0], interval=at[1:], **above(2.0, approx=1.0), expect=VERDICTS)

plot_grad_noise(lesson, a_ratio.mean(axis=0), nsr, log_ratio, paired_ratio, LEVEL, at)

# %% [markdown]
# ## The library's gradient checks
#
# Every RMSNorm/LayerNorm case of `scratchnorm.gradcheck` against central finite differences: float64, a
# random upstream gradient, one table. A gradient fails above a fixed tolerance, or above 10 times the
# *resolution* of the differences themselves (estimated from steps $h$ and $2h$, with a round-off floor), so
# a backward that is only slightly wrong, eps dropped for instance, fails too; the table gives, per case, the
# resolution of the tensor closest to failing and its error over that resolution.

# %%
FAMILY = ("RMSNorm", "LayerNorm", "PartialRMSNorm", "SimpleRMSNorm")
cases = [c for c in all_cases() if c.label.startswith(FAMILY)]
rows = []
for case in cases:
    module, x_case = case.build("numpy")
    checked = sn.gradcheck(module, x_case)
    check(checked.ok, f"gradcheck failed for {case.label}:\n{checked}")
    worst = max(checked.checks, key=lambda c: c.err_over_res)             # the tensor closest to failing
    rows.append([case.label, str(x_case.shape), f"{checked.max_rel_err:.1e}", f"{worst.resolution:.0e}",
                 f"{worst.err_over_res:.2f}", "ok"])
plot_gradcheck(lesson, rows, checked.checks[0].tol)

# %% [markdown]
# ## Exercise: LayerNorm's backward, yourself
#
# Fill in `backward` in the next cell (the walk above, or its closed form), in the exercise's contract: it gets
# the forward's inputs and returns the gradients. The cell after it checks it with
# `scratchnorm.exercises.check`, which runs it on random float64 inputs with a random upstream gradient, reports
# each gradient, and names the mistake when it recognizes one. **How to switch:** on this page (`make lessons`,
# the book) `MINE = False`, and the check runs on the library's own solution, so you see what a passing report
# looks like; in your copy of the notebook, write `backward`, set `MINE = True`, and run both cells. From a
# terminal, the same exercise: `python -m scratchnorm.exercises new layernorm ex`, then `python -m
# scratchnorm.exercises check ex/layernorm.py`.

# %%
MINE = False                  # True once backward below is yours


def backward(dy, x, weight, eps):
    """LayerNorm over the last axis: return {"x": dL/dx, "weight": dL/dweight, "bias": dL/dbias}."""
    raise NotImplementedError("write LayerNorm's backward here, then set MINE = True")


# %%
lesson.exercise("layernorm", backward, mine=MINE)        # scratchnorm.exercises.check; see the text above

# %% [markdown]
# ## Questions
#
# **1.** Why is the mean term $-\overline{g}$ in LayerNorm's $dx$ and not in RMSNorm's, and what does it do to
# $\sum_i dx_i$?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"It is the path through the mean: each x_i moves the mean by 1/d. It makes sum(dx) = 0, since "
              f"adding a constant to x does not change LayerNorm's output (measured: |cos| of dx with 1 and with "
              f"x_hat at most {cos_ln:.0e}). RMSNorm subtracts no mean, so nothing removes that direction.")

# %% [markdown]
# **2.** At zero mean, RMSNorm's $dx$ is a little larger than LayerNorm's for the same $dy$. By how much, and
# why exactly that factor?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
check(abs(ratio0 - np.sqrt((d - 1) / (d - 2))) < 0.02, "at mean 0 the sizes differ by sqrt((d - 1)/(d - 2))")
lesson.answer(f"By a factor {ratio0:.4f}, against sqrt((d-1)/(d-2)) = {np.sqrt((d - 1) / (d - 2)):.4f} for d = {d}: "
              "a random g keeps d - 1 of its d directions through RMSNorm's projection and d - 2 through "
              "LayerNorm's. Not noise: a deterministic factor.")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    f"LayerNorm's backward is the chain rule through six nodes (each checked to "
    f"{max(np.max(np.abs(e)) for e in node_err.values()):.0e}); it simplifies to rstd (g - mean g - x_hat "
    "mean(g x_hat)) because the centred row sums to zero.",
    f"RMSNorm's is the same without the mean term: dx = R g, the paper's R, which removes the direction x "
    f"(smallest singular value {s_rms[-1] / s_rms[0]:.0e} of the largest).",
    "A row's mean carries no sampling noise, so 'more stable' can only mean the noise of dL/dW over minibatches; "
    "with a centred readout RMSNorm is the noisier once the row has a common mean, since the mean it keeps "
    f"varies from example to example: re-centring starts to pay once the row mean is {interval(*at, fmt='{:.2f}')} "
    "of the row's spread (" + lesson.result("starts to pay") + "). A readout that sums that mean would hide it.")

# %%
lesson.finish()
