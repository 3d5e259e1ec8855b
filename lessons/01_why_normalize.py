# %% [markdown]
# # Why normalize: activation and gradient scale through a deep MLP at initialization.
#
# A plain ReLU network $h_l = \mathrm{ReLU}(W_l h_{l-1})$ with weights drawn from
# $\mathcal{N}(0,\ s^2 \cdot 2/\text{fan\_in})$ multiplies the mean square of its activations by $s^2$ per
# layer, in expectation: half of the pre-activation's energy survives the ReLU, and $2/\text{fan\_in}$ puts it
# back (He et al. 2015). So
#
# $$
# \mathrm{RMS}(h_l) \approx s^l\, \mathrm{RMS}(h_0), \qquad
# \left\lVert \frac{\partial L}{\partial h_l} \right\rVert
# \approx s^{L-l} \left\lVert \frac{\partial L}{\partial h_L} \right\rVert .
# $$
#
# Only $s = 1$ (He initialization) keeps the scale; $s = 0.5$ or $2$ shrink or grow it geometrically: forward
# activations and backward gradients vanish or explode. With a normalization after every Linear
# (Linear $\to$ LayerNorm or RMSNorm $\to$ ReLU) each block starts from a vector of RMS 1, whatever $s$ is:
# the normalization divides the Linear's output by its own scale. That is the "weight matrix re-scaling"
# invariance of lesson 03, taken through every layer at once: the output does not change with $s$, the
# gradients reaching the activations do not either, and $\partial L / \partial W_l$ is divided by $s$
# (paper §4.2: larger weights get smaller updates).

# %%
import _path  # noqa: F401  (the repository on sys.path, however the lesson is started)
import matplotlib.pyplot as plt
import numpy as np

from lessons._common import APPROX, COMMON, HOLDS, check, explainer, paper, start
from lessons._grading import below
from scratchnorm import Linear, RMSNorm, nn

lesson = start(__name__, "01_why_normalize")

# %% [markdown]
# ## The networks
#
# Width $d$, $L$ hidden blocks, then a linear readout with He initialization ($s$ applies to the hidden layers
# only). The same random matrices, scaled by $s$, are used for every network, so the curves are paired. The
# loss is a fixed random linear function of the output, $L = \sum r \odot y$, so its gradient
# $\partial L/\partial y = r$ is a random vector of RMS 1. Everything runs through scratchnorm's layers
# (`scratchnorm.nn.mlp`) and their hand-written backward passes; `measure` records the scales at every block
# on one forward and one backward.

# %%
SCALES = (0.5, 1.0, 2.0)
NORMS = {"none": None, "LayerNorm": "layernorm", "RMSNorm": "rmsnorm"}
STYLES = {"none": "-", "LayerNorm": "--", "RMSNorm": ":"}
COLORS = {0.5: "tab:blue", 1.0: "tab:green", 2.0: "tab:red"}
WIDTHS = {0.5: 5.0, 1.0: 3.0, 2.0: 1.2}     # nested stripes: coinciding lines keep every colour visible


def rms(a):
    return float(np.sqrt(np.mean(np.square(a))))


def build(norm, scale, base_weights):
    """mlp: L x [Linear -> norm -> ReLU] + Linear readout; hidden weights s * sqrt(2/fan_in) * Z, biases 0."""
    d = base_weights[0].shape[1]
    model = nn.mlp([d] * (len(base_weights) + 1), norm=norm, activation="relu", backend="numpy")
    linears = [layer for layer in model.children.values() if isinstance(layer, Linear)]
    for i, (layer, z) in enumerate(zip(linears, base_weights)):
        s = 1.0 if i == len(linears) - 1 else scale        # the readout keeps He initialization
        layer.params["weight"] = s * np.sqrt(2.0 / d) * z
        layer.params["bias"] = np.zeros(d)
    return model


def measure(model, x, r):
    """One forward and one backward, layer by layer, recording the scales at every block."""
    layers = list(model.children.values())
    act, norm_out_dev, h = [], [], x
    for layer in layers:
        h = layer.forward(h)
        if isinstance(layer, nn.ReLU):
            act.append(rms(h))                                           # RMS of the block's output
        if isinstance(layer, RMSNorm):
            norm_out_dev.append(np.max(np.abs(np.sqrt(np.mean(h**2, axis=1)) - 1)))   # per row
    grad_in, grad_w, g = [], [], r
    for layer in reversed(layers):
        g = layer.backward(g)
        if isinstance(layer, Linear):
            grad_in.append(rms(g))                                       # dL/d(input of this Linear)
            grad_w.append(rms(layer.grads["weight"]))
    return dict(y=h, act=np.array(act), grad_in=np.array(grad_in[::-1])[:-1],   # hidden blocks' inputs
                grad_w=np.array(grad_w[::-1])[:-1], rms_dev=max(norm_out_dev, default=0.0))


# %% [markdown]
# ## The plain network
#
# One forward and one backward of every network. Without a normalization the activation RMS should change
# by a factor $s$ per layer: the slope of $\log \mathrm{RMS}(h_l)$ against $l$ is $\log s$.

# %%
depth, d, n = lesson.pick((30, 128, 16), (40, 256, 32))
rng = np.random.default_rng(1)
base = [rng.standard_normal((d, d)) for _ in range(depth + 1)]       # shared by every network
x, r = rng.standard_normal((n, d)), rng.standard_normal((n, d))
res = {(name, s): measure(build(norm, s, base), x, r) for name, norm in NORMS.items() for s in SCALES}

# Plain network: the activation RMS changes by a factor s per layer.
layers = np.arange(1, depth + 1)
factor = {s: float(np.exp(np.polyfit(layers, np.log(res["none", s]["act"]), 1)[0])) for s in SCALES}
worst = max(abs(factor[s] / s - 1) for s in SCALES)
lesson.claim("Without normalization the activation RMS grows or shrinks geometrically with depth, by a "
             "factor s per layer for ReLU and weights N(0, s²·2/fan_in); only s = 1 (He) keeps it",
             source=COMMON + " (He et al. 2015)",
             measured=f"{depth} layers, width {d}: fitted factor per layer "
                      + ", ".join(f"{factor[s]:.3f} for s = {s:g}" for s in SCALES)
                      + "; RMS after the last layer " + ", ".join(f"{res['none', s]['act'][-1]:.1e} (s = {s:g})"
                                                                  for s in SCALES) + " (input RMS 1)",
             value=worst, **below(0.1, approx=0.3), expect=HOLDS)

# %% [markdown]
# ## The normalized networks
#
# With LayerNorm or RMSNorm the block outputs and the gradients at the activations should not depend on
# $s$ at all, and should stay within a small factor over the whole depth.

# %%
# Normalized networks: flat activations and gradients, whatever s.
def spread(key, names):
    v = np.concatenate([res[nm, s][key] for nm in names for s in SCALES])
    return float(v.max() / v.min())
normed = ("LayerNorm", "RMSNorm")
act_spread, grad_spread = spread("act", normed), spread("grad_in", normed)
plain_grad = {s: float(res["none", s]["grad_in"].max() / res["none", s]["grad_in"].min()) for s in SCALES}
check(min(plain_grad[0.5], plain_grad[2.0]) > 1e6, "the plain network's gradients vanish or explode")
lesson.claim("With LayerNorm or RMSNorm after every Linear the activation RMS stays about constant with "
             "depth, whatever the initial scale", source=explainer("002", "§1.2 作用 (point 5)"),
             measured=f"max/min of the block-output RMS over {depth} layers and s in {SCALES}: "
                      f"{act_spread:.2f} (plain, s = 0.5 and 2: {spread('act', ['none']):.1e})",
             value=act_spread, **below(2, approx=4), expect=HOLDS)
same = max(np.max(np.abs(res[nm, s]["grad_in"] / res[nm, 1.0]["grad_in"] - 1)) for nm in normed for s in SCALES)
check(same < 1e-3, "with normalization the gradient at the activations does not depend on s")
lesson.claim("Normalization prevents vanishing and exploding gradients", source=explainer("002", "§1.2 作用 "
             "(point 5)"),
             measured=f"max/min of the RMS of dL/dh over the {depth} block inputs: LayerNorm and RMSNorm "
                      f"{grad_spread:.1f} for every s (a finite-width drift, no factor s per layer); "
                      "plain " + ", ".join(f"{plain_grad[s]:.1e} (s = {s:g})" for s in SCALES),
             value=grad_spread, **below(10, approx=100), expect=HOLDS)

rms_dev = max(res["RMSNorm", s]["rms_dev"] for s in SCALES)
lesson.claim("The RMS of RMSNorm's output is about 1 (γ = 1)", source=explainer("001", "§四 (demo)"),
             measured=f"every row of all {depth} RMSNorm layers, s in {SCALES}, eps = 1e-6: "
                      f"max |RMS − 1| = {rms_dev:.1e}",
             value=rms_dev, **below(1e-3, approx=0.05), expect=HOLDS)

# %% [markdown]
# ## The paper's invariance, through the whole network
#
# Scaling every hidden $W_l$ by $s$ should leave the output of a normalized network unchanged, and divide
# every $\partial L/\partial W_l$ by $s$ (§4.1–4.2): $s \cdot \mathrm{RMS}(\partial L/\partial W_l(s)) =
# \mathrm{RMS}(\partial L/\partial W_l(1))$.

# %%
# Paper §4.1-4.2 through the whole network: output invariant to s, dL/dW proportional to 1/s.
out_dev, grad_dev = 0.0, 0.0
for name in normed:
    ref = res[name, 1.0]
    for s in SCALES:
        out_dev = max(out_dev, rms(res[name, s]["y"] - ref["y"]) / rms(ref["y"]))
        grad_dev = max(grad_dev, np.max(np.abs(s * res[name, s]["grad_w"] / ref["grad_w"] - 1)))
lesson.claim("Scaling the weights by s leaves a normalized layer's output unchanged and divides dL/dW by s "
             "(implicit learning-rate adaptation)", source=paper("§4.1, §4.2"),
             measured=f"all {depth} hidden layers scaled at once, LayerNorm and RMSNorm (layer eps): "
                      f"output change {out_dev:.1e} (relative RMS); max |s·RMS(dW(s))/RMS(dW(1)) − 1| = "
                      f"{grad_dev:.1e}",
             value=max(out_dev, grad_dev), **below(1e-12, approx=1e-3), expect=APPROX)

# %% [markdown]
# ## The figure
#
# Against depth, log scale: the RMS of each block's output (forward), the RMS of the gradient reaching each
# block's input (backward), and the RMS of each weight gradient. Solid: no normalization; dashed: LayerNorm;
# dotted: RMSNorm; the colour is $s$. Top row: the plain lines fan out geometrically, slope $\log s$ per
# layer: $2^{40} \approx 10^{12}$ up or down after 40 layers; the normalized lines stay flat. Bottom row,
# zoomed: a normalized block's output has RMS about $1/\sqrt{2}$ (the RMS-1 normalized vector, about half of
# its energy cut by the ReLU) at every depth and for every $s$; the gradient at the activations drifts by a
# few times over the depth, the same for every $s$ (a finite-width random walk, not a factor per layer); for
# each normalization the weight gradients of the three $s$ are parallel lines a factor 2 apart
# ($\partial L/\partial W \propto 1/s$). Note that the plain net with the exactly right $s = 1$ keeps its
# scales too: what normalization buys is not needing to get $s$ right.

# %%
fig, axes = plt.subplots(2, 3, figsize=(15, 8.5), layout="constrained")
panels = [("act", "RMS of block output $h_l$", "Forward: activations"),
          ("grad_in", r"RMS of $\partial L/\partial h_{l-1}$ (block input)", "Backward: gradient at activations"),
          ("grad_w", r"RMS of $\partial L/\partial W_l$", "Backward: weight gradients")]
for row, shown in enumerate([res, {k: m for k, m in res.items() if k[0] != "none" or k[1] == 1.0}]):
    for ax, (key, ylabel, title) in zip(axes[row], panels):
        for (name, s), m in shown.items():
            ax.semilogy(layers, m[key], STYLES[name], color=COLORS[s], linewidth=WIDTHS[s],
                        label=f"{name}, s = {s:g}" if (row, key) == (0, "act") else None)
        ax.set(xlabel="hidden layer l", ylabel=ylabel,
               title=title if row == 0 else "zoom")
fig.legend(loc="outside lower center", ncol=9, fontsize=9)
fig.suptitle(f"ReLU MLP at initialization, {depth} hidden layers of width {d}, weights N(0, s²·2/fan_in)\n"
             "solid: no normalization, dashed: LayerNorm, dotted: RMSNorm; colour and width: s. Bottom row: the "
             "normalized nets and the plain one with s = 1.\nIn the first two columns the normalized lines for the "
             "three s "
             "coincide: they show as nested stripes (wide blue, green, thin red).")
lesson.save(fig, "depth")

# %% [markdown]
# ## Questions
#
# **1.** The plain network with $s = 1$ keeps its scale through every layer. What, then, does a normalization
# buy at initialization?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"Freedom from getting s right. The plain net's fitted factor per layer is "
              f"{factor[1.0]:.3f} at s = 1 but {factor[0.5]:.3f} and {factor[2.0]:.3f} at s = 0.5 and 2, "
              f"which compounds over {depth} layers; with LayerNorm or RMSNorm the block outputs stay within a "
              f"factor {act_spread:.2f} for every s, because each block divides by its own input's scale.")

# %% [markdown]
# **2.** A normalized layer's weight gradient is divided by $s$. Why does that make large weights learn slowly,
# and by how much more than the gradient alone suggests?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
g1, g2 = res["RMSNorm", 1.0]["grad_w"][0], res["RMSNorm", 2.0]["grad_w"][0]
lesson.answer(f"At s = 2 the first layer's weight gradient has RMS {g2:.3g} against {g1:.3g} at s = 1 "
              f"(ratio {g2 / g1:.3f}), while the weights are twice as large: a step of the same learning rate "
              "changes W by a relative amount s squared smaller, a quarter. The layer adapts its own step size.")

# %% [markdown]
# **3.** RMSNorm's output should have RMS exactly 1, yet the run finds a small deviation. Where does it come
# from?

# %% tags=["remove-input"] jupyter={"source_hidden": true, "outputs_hidden": true}
lesson.answer(f"From eps: the layer divides by sqrt(mean(a^2) + eps), not sqrt(mean(a^2)), so the output "
              f"RMS is sqrt(ms / (ms + eps)), about 1 - eps / (2 ms). The run's largest deviation is "
              f"{rms_dev:.1e} with eps = 1e-6: the rows with the smallest mean square ms deviate most.")


# %% [markdown]
# ## Takeaways

# %% tags=["remove-input"]
lesson.takeaways(
    f"Without a norm the activation scale changes by about s per layer (fitted {factor[0.5]:.2f} at s = 0.5, "
    f"{factor[2.0]:.2f} at s = 2): after {depth} layers it has vanished or exploded.",
    f"With LayerNorm or RMSNorm after each layer the block outputs stay within a factor {act_spread:.2f} of each "
    "other whatever the initial scale; 'normalization prevents vanishing and exploding gradients': "
    + lesson.result("vanishing and exploding") + ".",
    "'Scaling the weights leaves the output alone and divides dL/dW by the scale': "
    + lesson.result("Scaling the weights by s") + ".")

# %%
lesson.finish()
