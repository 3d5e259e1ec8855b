"""One layer normalized by LayerNorm or by RMSNorm, on inputs with a real row mean (lessons 04 and 15).

The model is one block of a network: hidden states h = ReLU(u A), the features of a ReLU layer (positive, each
row with a mean about 0.7 times its std), then

    a = h W            (B, d)   the summed inputs, what the norm normalizes; W the weight whose gradient we study
    y = Norm(a)        (B, d)   LayerNorm or RMSNorm, no affine
    loss = mean_b (y_b . r - t_b)^2 / 2

with a fixed readout r and targets t from a fixed teacher.

The row mean of a. With zero-mean random weights, W = W0 (entries N(0, 1/d_in)), the positive mean of h does
not reach a as a row mean: a_j = sum_i h_i W0_ij gives each unit its own offset, and a's row mean over its row
std is about 0.1. ``shift`` gives the weights a common mean, W = W0 + shift / sqrt(d_in) (shift: the weights'
mean in units of their std; the paper's "shift of the weight matrix"), which adds the same amount,
shift * sum_i h_i / sqrt(d_in), to every unit of a row: a real row mean, which varies from example to example
with sum_i h_i. ``a_mean_over_std`` measures it on a itself, the vector the norm sees. ``noise`` instead adds
shift noise: a normal draw per example, ``noise`` times a's row std, added to every unit of that example's a (a
row mean that is 0 on average and changes from example to example; lesson 15).

At fixed parameters, each minibatch b gives a gradient G_b = dL/dW. Its noise is measured as a noise-to-signal
ratio,

    NSR = mean_b ||G_b - G||^2 / ||G||^2,     G = mean_b G_b,

the quantity that decides how much an SGD step wanders. Both norms see the same minibatches, the same W, r
and t, so the comparison is paired.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

import scratchnorm as sn
from lessons._stats import mean_interval
from lessons._style import color

NORMS = {"LayerNorm": (sn.layer_norm_forward, sn.layer_norm_backward),
         "RMSNorm": (sn.rms_norm_forward, sn.rms_norm_backward)}


def layer(seed, *, n=4096, d_in=48, d=64):
    """The data and the zero-mean weights of one seed: h (n, d_in), W0 (d_in, d), readout r (d,), targets t (n,)."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((n, d_in))
    h = np.maximum(u @ rng.standard_normal((d_in, d_in)) / np.sqrt(d_in), 0.0)   # ReLU features, mean > 0
    W0 = rng.standard_normal((d_in, d)) / np.sqrt(d_in)
    r = rng.standard_normal(d) / np.sqrt(d)
    t = np.tanh(u @ rng.standard_normal(d_in) / np.sqrt(d_in))                    # a teacher's targets
    z = rng.standard_normal((n, 1))                                               # per-example shift noise
    return h, W0, r, t, z


def shifted(W0, shift):
    """W0 with a common mean: every weight raised by ``shift`` times the weights' std, 1/sqrt(d_in)."""
    return W0 + shift / np.sqrt(W0.shape[0])


def noise_bias(h, W0, z, noise):
    """The per-example shift noise of a: z_n times ``noise`` times a's row std under W0 (averaged), (n, 1)."""
    return z * noise * float(np.mean((h @ W0).std(axis=1))) if noise else np.zeros_like(z)


def row_mean_of_a(h, W0, bias, shifts) -> dict:
    """{"a mean/std": [...], "a mean/std spread": [...]}: the row mean/std of a = h W + bias at each shift, averaged
    over the examples, and its std over the examples."""
    a = [h @ shifted(W0, s) + bias for s in shifts]
    return {"a mean/std": [a_mean_over_std(x) for x in a], "a mean/std spread": [a_mean_over_std_spread(x) for x in a]}


def a_mean_over_std(a) -> float:
    """The row mean over the row std of the summed inputs a (n, d), averaged over the rows."""
    return float(np.mean(a.mean(axis=1) / a.std(axis=1)))


def a_mean_over_std_spread(a) -> float:
    """How much the row mean over the row std of a (n, d) changes between examples: its std over the rows."""
    return float(np.std(a.mean(axis=1) / a.std(axis=1)))


def minibatch_gradients(forward, backward, h, W, bias, r, t, batch):
    """dL/dW for each consecutive minibatch of ``batch`` rows of h (a = h W + bias): (n_batches, d_in, d)."""
    grads = []
    for s in range(0, len(h) - batch + 1, batch):
        hb, tb = h[s:s + batch], t[s:s + batch]              # (B, d_in), (B,)
        y, cache = forward(hb @ W + bias[s:s + batch], eps=1e-5)   # (B, d)
        dy = np.outer(y @ r - tb, r) / batch                 # dL/dy, (B, d)
        grads.append(hb.T @ backward(dy, cache)["x"])        # dL/dW = h^T dL/da, (d_in, d)
    return np.array(grads)


def noise_to_signal(grads):
    mean = grads.mean(axis=0)
    return float(np.mean(np.sum((grads - mean) ** 2, axis=(1, 2))) / np.sum(mean ** 2))


def gradient_noise(seed, *, n=4096, batch=32, shifts=(0.0,), noise=0.0):
    """{name: [NSR at each shift], "a mean/std" and "a mean/std spread" (``row_mean_of_a``), "h mean/std": the
    row mean/std of h} for one seed."""
    h, W0, r, t, z = layer(seed, n=n)
    bias = noise_bias(h, W0, z, noise)
    out = {name: [noise_to_signal(minibatch_gradients(fwd, bwd, h, shifted(W0, s), bias, r, t, batch))
                  for s in shifts] for name, (fwd, bwd) in NORMS.items()}
    return out | row_mean_of_a(h, W0, bias, shifts) | {"h mean/std": a_mean_over_std(h)}


def hidden_variance(seed, *, n=4096, shifts=(0.0,), noise=0.0):
    """{name: [the variance across examples of each unit of y = Norm(a), averaged over the units, at each shift],
    "a mean/std" and "a mean/std spread" (``row_mean_of_a``)} for one seed."""
    h, W0, _, _, z = layer(seed, n=n)
    bias = noise_bias(h, W0, z, noise)
    out = {name: [float(np.mean(fwd(h @ shifted(W0, s) + bias, eps=1e-5)[0].var(axis=0))) for s in shifts]
           for name, (fwd, _) in NORMS.items()}
    return out | row_mean_of_a(h, W0, bias, shifts)


def plot_grad_noise(lesson, a_ratio, nsr, log_ratio, paired_ratio):
    """Lesson 04's figure: each norm's noise-to-signal against a's row mean/std (geometric mean over seeds,
    95% interval shaded), and the paired ratio RMSNorm/LayerNorm (one dot per seed)."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.3), layout="constrained")
    for name in ("LayerNorm", "RMSNorm"):
        band = np.exp([mean_interval(np.log([r[name][i] for r in nsr])) for i in range(len(a_ratio))])  # (shifts, 3)
        axes[0].semilogy(a_ratio, band[:, 0], "o-", color=color(name), label=f"{name}, geometric mean")
        axes[0].fill_between(a_ratio, band[:, 1], band[:, 2], color=color(name), alpha=0.2)
    axes[1].plot(a_ratio, np.exp(log_ratio.T), ".", color="0.6", ms=4)
    axes[1].plot(a_ratio, paired_ratio[:, 0], "o-", color="k", label="geometric mean (dots: one per seed)")
    axes[1].fill_between(a_ratio, paired_ratio[:, 1], paired_ratio[:, 2], color="k", alpha=0.15, label="95% interval")
    axes[1].axhline(1, color="k", lw=0.8)
    axes[1].axhline(0.9, color="k", lw=0.8, ls=":")
    axes[1].set_yscale("log")
    axes[0].set(xlabel="row mean / row std of a = hW (the vector normalized)", ylabel="noise-to-signal of dL/dW (log)",
                title=f"gradient noise over minibatches, {len(nsr)} seeds (shaded: 95% interval)")
    axes[1].set(xlabel="row mean / row std of a = hW (the vector normalized)", ylabel="RMSNorm / LayerNorm, same seed",
                title="paired ratio: below 1 means RMSNorm is less noisy")
    axes[0].legend()
    axes[1].legend()
    lesson.save(fig, "grad_noise")
