"""Gradient noise across minibatches, for a layer normalized by LayerNorm or by RMSNorm (lesson 04).

The model is one block of a network: real-valued hidden states with a nonzero mean, the features of a ReLU
layer, h = ReLU(u A), positive, each row with a mean about 0.7 times its std (``mean_over_std``), then

    a = h W            (B, d)   the weight whose gradient we study
    y = Norm(a)        (B, d)   LayerNorm or RMSNorm, no affine
    loss = mean_b (y_b . r - t_b)^2 / 2

with a fixed readout r and targets t from a fixed teacher. At fixed parameters, each minibatch b gives a
gradient G_b = dL/dW. Its noise is measured as a noise-to-signal ratio,

    NSR = mean_b ||G_b - G||^2 / ||G||^2,     G = mean_b G_b,

the quantity that decides how much an SGD step wanders. Both norms see the same minibatches, the same W, r
and t, so the comparison is paired. ``shift`` adds a constant to every hidden state (a larger mean).
"""
from __future__ import annotations

import numpy as np

import scratchnorm as sn

NORMS = {"LayerNorm": (sn.layer_norm_forward, sn.layer_norm_backward),
         "RMSNorm": (sn.rms_norm_forward, sn.rms_norm_backward)}


def minibatch_gradients(forward, backward, h, W, r, t, batch):
    """dL/dW for each consecutive minibatch of ``batch`` rows of h: (n_batches, d_in, d)."""
    grads = []
    for s in range(0, len(h) - batch + 1, batch):
        hb, tb = h[s:s + batch], t[s:s + batch]              # (B, d_in), (B,)
        y, cache = forward(hb @ W, eps=1e-5)                 # (B, d)
        dy = np.outer(y @ r - tb, r) / batch                 # dL/dy, (B, d)
        grads.append(hb.T @ backward(dy, cache)["x"])        # dL/dW = h^T dL/da, (d_in, d)
    return np.array(grads)


def noise_to_signal(grads):
    mean = grads.mean(axis=0)
    return float(np.mean(np.sum((grads - mean) ** 2, axis=(1, 2))) / np.sum(mean ** 2))


def gradient_noise(seed, *, n=4096, d_in=48, d=64, batch=32, shifts=(0.0,)):
    """{name: [NSR at each shift]} for one seed: the hidden states, weights, readout and teacher drawn from it."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((n, d_in))
    h = np.maximum(u @ rng.standard_normal((d_in, d_in)) / np.sqrt(d_in), 0.0)   # ReLU features, mean > 0
    W = rng.standard_normal((d_in, d)) / np.sqrt(d_in)
    r = rng.standard_normal(d) / np.sqrt(d)
    t = np.tanh(u @ rng.standard_normal(d_in) / np.sqrt(d_in))                    # a teacher's targets
    return {name: [noise_to_signal(minibatch_gradients(fwd, bwd, h + shift, W, r, t, batch)) for shift in shifts]
            for name, (fwd, bwd) in NORMS.items()}


def mean_over_std(seed, n=4096, d_in=48):
    """The hidden states' row mean over row std, averaged over rows (how far from zero-mean they are)."""
    rng = np.random.default_rng(seed)
    h = np.maximum(rng.standard_normal((n, d_in)) @ rng.standard_normal((d_in, d_in)) / np.sqrt(d_in), 0.0)
    return float(np.mean(h.mean(axis=1) / h.std(axis=1)))


def hidden_variance(seed, *, n=4096, d_in=48, d=64):
    """{name: the variance across examples of each unit of y = Norm(h W), averaged over the units}."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((n, d_in))
    h = np.maximum(u @ rng.standard_normal((d_in, d_in)) / np.sqrt(d_in), 0.0)
    W = rng.standard_normal((d_in, d)) / np.sqrt(d_in)
    return {name: float(np.mean(fwd(h @ W, eps=1e-5)[0].var(axis=0))) for name, (fwd, _) in NORMS.items()}
