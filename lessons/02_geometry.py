# %% [markdown]
# # Geometry: what RMSNorm and LayerNorm do to a vector.
#
# RMSNorm divides $x$ by its root mean square,
# $\mathrm{RMS}(x) = \sqrt{\tfrac{1}{d}\sum_i x_i^2} = \lVert x \rVert / \sqrt{d}$. So
#
# $$\lVert \mathrm{RMSNorm}(x) \rVert = \frac{\lVert x \rVert}{\mathrm{RMS}(x)} = \sqrt{d}:$$
#
# every nonzero vector lands on the sphere of radius $\sqrt{d}$, in the direction it already had
# (weight $= 1$).
#
# LayerNorm first subtracts the mean, $x - \bar{x}\,\mathbf{1}$, which is the orthogonal projection onto the
# hyperplane $\sum_i x_i = 0$ (it removes the component along $\mathbf{1} = (1, \dots, 1)$). Then it divides
# by the standard deviation, the RMS of what is left. Its outputs lie on the sphere of radius $\sqrt{d}$
# *and* in that hyperplane: for $d = 3$, on a circle. When $\bar{x} = 0$ the projection does nothing and the
# two layers give the same output.

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numpy as np

from lessons._common import APPROX, COMMON, HOLDS, check, explainer, paper, start
from lessons._grading import below
from scratchnorm import layer_norm_forward, rms_norm_forward

lesson = start(__name__, "02_geometry")

# %% [markdown]
# The layers come from the NumPy reference (`rms_norm_forward`, `layer_norm_forward`); `rms_norm` takes the
# $\epsilon$ and its mode ("inside", "outside", "clamp", compared at the end of the lesson).

# %%
EPS = 1e-6          # the RMSNorm layer's default (LLaMA-1)
MODES = {"inside": r"inside: $x/\sqrt{ms+\epsilon}$", "outside": r"outside: $x/(\sqrt{ms}+\epsilon)$",
         "clamp": r"clamp: $x/\sqrt{\max(ms,\epsilon)}$"}


def rms(v):
    return np.sqrt(np.mean(v**2, axis=-1))


def rms_norm(x, eps=EPS, mode="inside"):
    return rms_norm_forward(x, eps=eps, eps_mode=mode)[0]


# %% [markdown]
# ## In three dimensions
#
# Left: inputs (grey) move radially onto the sphere (blue). Right: LayerNorm drops them onto the plane
# $x_1 + x_2 + x_3 = 0$ (thin lines along $\mathbf{1}$), and then onto the circle of radius $\sqrt{3}$ in that
# plane. The picture uses $\epsilon = 0$, so that the outputs land exactly on the sphere and the circle.

# %%
def sphere_figure(lesson, rng):
    x = rng.normal(loc=[1.8, 1.2, 0.6], scale=0.9, size=(30, 3))   # a picture: 30 points in both modes
    y_rms = rms_norm(x, eps=0.0)
    xc = x - x.mean(axis=1, keepdims=True)             # the projection onto sum(x) = 0
    y_ln = layer_norm_forward(x, eps=0.0)[0]
    r = np.sqrt(3.0)
    u, v = np.mgrid[0:2 * np.pi:24j, 0:np.pi:12j]
    ball = r * np.array([np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v)])
    e1, e2 = np.array([1, -1, 0]) / np.sqrt(2), np.array([1, 1, -2]) / np.sqrt(6)   # a basis of the plane
    t = np.linspace(0, 2 * np.pi, 200)
    circle = r * (np.outer(np.cos(t), e1) + np.outer(np.sin(t), e2))
    s_, t_ = np.meshgrid(np.linspace(-2.6, 2.6, 2), np.linspace(-2.6, 2.6, 2))
    plane = np.einsum("ij,k->kij", s_, e1) + np.einsum("ij,k->kij", t_, e2)

    fig = plt.figure(figsize=(12, 5.8))
    for i, (title, y, color) in enumerate([("RMSNorm: radially onto the sphere of radius √3", y_rms, "tab:blue"),
                                           ("LayerNorm: onto the plane x+y+z = 0, then its circle",
                                            y_ln, "tab:orange")]):
        ax = fig.add_subplot(1, 2, i + 1, projection="3d")
        ax.plot_wireframe(*ball, color="0.85", linewidth=0.4)
        ax.scatter(*x.T, color="0.35", s=12, label="input x")
        if i == 0:
            for a in x:
                ax.plot(*np.c_[a, np.zeros(3)], color="tab:blue", linewidth=0.5, alpha=0.5)
        else:
            ax.plot_surface(*plane, color="tab:green", alpha=0.12)
            ax.plot(*circle.T, color="tab:orange", linewidth=1.2)
            for a, b in zip(x, xc):
                ax.plot(*np.c_[a, b], color="0.5", linewidth=0.5)
            ax.scatter(*xc.T, color="tab:green", s=10, label="x − mean(x)·1, in the plane")
            ax.quiver(0, 0, 0, 1.5, 1.5, 1.5, color="k", linewidth=1.5)
            ax.text(1.6, 1.6, 1.7, "direction 1", fontsize=9)
        ax.scatter(*y.T, color=color, s=18, depthshade=False, label="output y")
        ax.set(xlabel="$x_1$", ylabel="$x_2$", zlabel="$x_3$", title=title, box_aspect=(1, 1, 1),
               xlim=(-2.6, 2.6), ylim=(-2.6, 2.6), zlim=(-2.6, 2.6))
        ax.view_init(elev=18, azim=-50)
        ax.legend(loc="upper left", fontsize=8)
    fig.suptitle("d = 3: where the layers send a vector (no affine, eps = 0 for the picture)")
    lesson.save(fig, "sphere")
    return y_ln


rng = np.random.default_rng(2)
d = 64
y_ln3 = sphere_figure(lesson, rng)
check(np.allclose(y_ln3.sum(axis=1), 0, atol=1e-12), "LayerNorm outputs lie in the plane sum = 0")

# %% [markdown]
# ## The sphere, and what $\epsilon$ does to it
#
# In $d = 64$, with inputs whose RMS spans two decades: without $\epsilon$ (the paper's definition) every
# output has norm $\sqrt{d}$.

# %%
x = rng.standard_normal((lesson.pick(500, 5000), d))
x *= np.exp(rng.uniform(np.log(0.1), np.log(10), (len(x), 1)))  # RMS(x) from about 0.1 to 10
sphere_err = np.max(np.abs(np.linalg.norm(rms_norm(x, eps=0.0), axis=1) / np.sqrt(d) - 1))
lesson.claim("RMSNorm (no eps) puts every nonzero vector on the sphere of radius √d",
             source=paper("§4"), measured=f"max |‖y‖/√d − 1| = {sphere_err:.1e} (eps = 0)",
             value=sphere_err, **below(1e-12, approx=1e-3), expect=HOLDS)

# %% [markdown]
# The layer's $\epsilon$ (inside the root) shrinks the output's RMS to $\sqrt{ms/(ms+\epsilon)}$. The cell
# measures it on the inputs above, and on one of RMS $\sqrt{\epsilon}$ (the third question at the end).

# %%
rms_out = rms(rms_norm(x))
typical_dev = np.max(np.abs(rms_out - 1))
tiny = rms(rms_norm(x[:1] / rms(x[:1])[:, None] * np.sqrt(EPS)))[0]  # an input with RMS = sqrt(eps)
check(typical_dev > 0 and abs(tiny - np.sqrt(0.5)) < 1e-9, "eps shrinks the output's RMS as predicted")
lesson.claim("The RMS of RMSNorm's output is about 1 (γ = 1)", source=explainer("001", "§四 (demo)"),
             measured=f"eps = 1e-6, RMS(x) in [0.1, 10]: max |RMS(y) − 1| = {typical_dev:.1e}; "
                      f"RMS(x) = √eps: RMS(y) = {tiny:.3f}",
             value=typical_dev, **below(1e-3, approx=0.05), expect=HOLDS)

# %% [markdown]
# So scale invariance, $\mathrm{RMSNorm}(kx) = \mathrm{RMSNorm}(x)$, is exact only for $\epsilon = 0$: with the
# layer's $\epsilon$ it holds approximately for inputs well above $\sqrt{\epsilon}$, and breaks for a $k$ that brings
# them near it.

# %%
ks = np.logspace(-6, 6, 25)
exact = max(np.max(np.abs(rms_norm(k * x, eps=0.0) - rms_norm(x, eps=0.0))) for k in ks)
x1 = x / rms(x)[:, None]                          # RMS 1
mid = max(np.max(rms(rms_norm(k * x1) - rms_norm(x1))) for k in np.logspace(-1, 1, 9))
small = np.max(rms(rms_norm(1e-3 * x1) - rms_norm(x1)))
lesson.claim("RMSNorm(kx) = RMSNorm(x)", source=explainer("000", "§8.2"),
             measured=f"eps = 0: max |Δy| = {exact:.1e} for k in 1e-6..1e6; eps = 1e-6, RMS(x) = 1: "
                      f"RMS(Δy) ≤ {mid:.1e} for k in [0.1, 10], {small:.2f} at k = 1e-3",
             value=mid, **below(1e-12, approx=1e-3), expect=APPROX)

# %% [markdown]
# ## LayerNorm against RMSNorm
#
# LayerNorm's output has mean 0 and variance $\mathrm{var}/(\mathrm{var}+\epsilon)$.

# %%
y_ln = layer_norm_forward(x1, eps=1e-5)[0]
mean_dev, var_dev = np.max(np.abs(y_ln.mean(axis=1))), np.max(np.abs(y_ln.var(axis=1) - 1))
lesson.claim("LayerNorm's output has mean 0 and variance 1 (γ = 1, β = 0)", source=COMMON,
             measured=f"max |mean| = {mean_dev:.1e}; variance = var/(var + eps): max |var − 1| = {var_dev:.1e}",
             value=max(mean_dev, var_dev), **below(1e-12, approx=1e-3), expect=APPROX)

# %% [markdown]
# Rows $z$ of mean 0 and standard deviation $s = 1$, shifted by $m$: RMSNorm and LayerNorm agree at $m = 0$, and
# their distance grows as $\sqrt{2 - 2/\sqrt{1 + (m/s)^2}}$ (the angle between $z + m\mathbf{1}$ and $z$). The
# figure: that distance against $m/s$, measured and in theory.

# %%
ratios = np.linspace(0, 5, 26)
z = x1 - x1.mean(axis=1, keepdims=True)
z /= rms(z)[:, None]                                          # mean 0, std 1 per row
dist = np.array([rms(rms_norm(z + m) - layer_norm_forward(z + m, eps=EPS)[0]).mean() for m in ratios])
at_zero = np.max(np.abs(rms_norm(z) - layer_norm_forward(z, eps=EPS)[0]))
theory = np.sqrt(2 - 2 / np.sqrt(1 + ratios**2))
check(np.allclose(dist[1:], theory[1:], rtol=1e-4), "the distance follows sqrt(2 - 2/sqrt(1 + (m/s)^2))")
lesson.claim("When mean(x) = 0, RMSNorm equals LayerNorm", source=paper("§4"),
             measured=f"max |RMSNorm − LayerNorm| = {at_zero:.1e} (same eps, {len(z)} rows, d = {d})",
             value=at_zero, **below(1e-12, approx=1e-3), expect=HOLDS)

fig, ax = plt.subplots(figsize=(6.5, 4.2))
ax.plot(ratios, theory, color="0.3", label=r"theory $\sqrt{2-2/\sqrt{1+(m/s)^2}}$")
ax.plot(ratios, dist, "o", color="tab:red", ms=4, label=f"measured (mean of {len(z)} rows)")
ax.set(xlabel="mean(x) / std(x)", ylabel="RMS of RMSNorm(x) − LayerNorm(x)",
       title=f"The two layers agree only when the mean is 0 (d = {d})")
ax.legend()
lesson.save(fig, "mean")

# %% [markdown]
# ## $\epsilon$ near the origin
#
# With "inside", $x/\sqrt{ms+\epsilon}$, a vector with $\mathrm{RMS}(x)$ well below $\sqrt{\epsilon}$ is shrunk
# toward 0 instead of reaching the sphere: the output fills a ball. "outside", $x/(\mathrm{RMS}(x)+\epsilon)$,
# reaches the sphere already at $\mathrm{RMS}(x) \gg \epsilon$; "clamp", $x/\sqrt{\max(ms, \epsilon)}$, is
# linear ($x/\sqrt{\epsilon}$) inside the ball and exact on the sphere outside it. In $d = 2$: where small
# inputs land for the three modes.

# %%
# eps near the origin, d = 2: where do small vectors land?
n = lesson.pick(300, 1500)
angle = rng.uniform(0, 2 * np.pi, n)
in_rms = 10 ** rng.uniform(-7.5, -1, n)
x2 = np.sqrt(2) * in_rms[:, None] * np.c_[np.cos(angle), np.sin(angle)]   # RMS(x2) = in_rms
fig, axes = plt.subplots(1, 3, figsize=(13, 4.6), constrained_layout=True)
t = np.linspace(0, 2 * np.pi, 200)
for ax, (mode, label) in zip(axes, MODES.items()):
    y = rms_norm(x2, mode=mode)
    check(np.all(rms(y) <= 1 + 1e-12), f"{mode}: outputs stay inside the ball of radius sqrt(d)")
    ax.plot(np.sqrt(2) * np.cos(t), np.sqrt(2) * np.sin(t), "k--", linewidth=0.8)
    sc = ax.scatter(*y.T, c=np.log10(in_rms), cmap="viridis", s=9, vmin=-7.5, vmax=-1)
    ax.set(title=label, xlabel="$y_1$", ylabel="$y_2$", aspect="equal", xlim=(-1.6, 1.6), ylim=(-1.6, 1.6))
fig.colorbar(sc, ax=axes, label="log10 RMS(x) of the input", shrink=0.85)
fig.suptitle(f"d = 2, eps = {EPS:g} (√eps = {np.sqrt(EPS):g}): inputs far below √eps (inside, clamp) "
             f"or eps (outside) land inside the circle of radius √2")
lesson.save(fig, "eps")

# %% [markdown]
# ## Questions
#
# **1.** LayerNorm's outputs in three dimensions lie on a circle, RMSNorm's on a whole sphere. How many
# dimensions does each layer's output set have in $d$ dimensions, and why?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"RMSNorm's output set has d - 1 dimensions and LayerNorm's d - 2, one fewer for each equation "
              f"the outputs satisfy. RMSNorm fixes only the norm, so its outputs fill the whole sphere of radius "
              f"sqrt(d). LayerNorm also removes the mean, which puts its outputs in the hyperplane sum = 0 as well "
              f"(max |sum| here {np.max(np.abs(y_ln3.sum(axis=1))):.0e}): where the sphere meets the hyperplane, "
              "in d = 3 a circle.")

# %% [markdown]
# **2.** At mean/std ratio $m/s = 5$, how far apart are the two layers' outputs, and what limit does the distance
# approach as the mean grows?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"The RMS distance is {dist[-1]:.3f} at m/s = {ratios[-1]:g} (theory {theory[-1]:.3f}), on "
              "its way to sqrt(2) = 1.414: for a large mean, RMSNorm's output points along the all-ones "
              "direction, and LayerNorm's (which removed it) is orthogonal to it.")

# %% [markdown]
# **3.** An input of RMS $\sqrt{\epsilon}$ comes out of RMSNorm with RMS below 1. By how much, and which eps mode
# would put it on the sphere?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"Its output RMS is {tiny:.3f} = sqrt(1/2): inside the root, eps is as large as the mean square "
              "itself. The outside mode divides by RMS(x) + eps = 1.001 RMS(x) here (RMS(x) = 1e-3 >> eps = 1e-6), "
              "which leaves it within 0.1% of the sphere; clamp puts it exactly on it, since ms = eps is the "
              "clamp's boundary.")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    f"RMSNorm puts a vector on the sphere of radius sqrt(d) (to {sphere_err:.0e} without eps); LayerNorm also "
    "removes the mean, so its outputs lie where that sphere meets the plane sum = 0.",
    "'At mean 0, RMSNorm equals LayerNorm': " + lesson.result("When mean(x) = 0") + "; they part as the mean "
    "grows against the spread.",
    f"eps shrinks small inputs: an input of RMS sqrt(eps) comes out with RMS {tiny:.3f}, not 1.")

# %%
lesson.finish()
