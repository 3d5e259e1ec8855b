"""Numerical helpers of the precision lessons (08, 14, 17): formats, naive half-precision norms, error measures.

Rounding error has one unit across the lessons: the ulp, the spacing of the output's format at the exact
value (``ulp_error``). One correct rounding is off by at most half an ulp.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import ml_dtypes
import numpy as np

import scratchnorm as sn

F16 = np.float16


def to_bf16(x):
    """Round to bfloat16 (8 significant bits, nearest even), kept in a float32 array."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32)
    u = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return u.view(np.float32)


def ulp_error(y, exact, dtype):
    """|y - exact| in ulps of ``dtype`` at |exact|: the spacing 2^(floor(log2 |exact|) - p) of a format with p
    fraction bits (subnormals: the smallest normal's spacing). ml_dtypes.finfo knows bfloat16 as well."""
    info = ml_dtypes.finfo(dtype)
    exponent = np.floor(np.log2(np.maximum(np.abs(exact), float(info.smallest_normal))))
    return np.abs(np.asarray(y, dtype=np.float64) - exact) / 2.0 ** (exponent - info.nmant)


def f16_sum(a):
    """A float16 running sum over the last axis: every addition rounded to float16."""
    return np.add.accumulate(a, axis=-1, dtype=F16)[..., -1:]


def naive_rms_norm(x, eps=1e-6):
    x = x.astype(F16)
    ms = f16_sum(x * x) / F16(x.shape[-1])                 # x*x overflows for |x| > 256
    return x / np.sqrt(ms + F16(eps))


def half_square_rms_norm(x, eps=1e-6):
    """How explainers 002 and 003 write it: x*x in float16, then the mean accumulated in float32.

    003's ByteRMSNorm takes ``mean((x * x).float())``; 002 squares the half input (``x.pow(2).mean(-1)``:
    PyTorch accumulates the mean of a half tensor in float32). The accumulation no longer overflows, but the
    square already has: any |x| >= 256 gives inf. Hugging Face's LlamaRMSNorm upcasts before it squares
    (``hidden_states.to(torch.float32)``, then ``pow(2).mean``), as the library does: it does not overflow.
    """
    x = x.astype(F16)
    ms = np.mean((x * x).astype(np.float32), axis=-1, keepdims=True)   # (x*x) is float16: inf for |x| >= 256
    return (x.astype(np.float32) / np.sqrt(ms + np.float32(eps))).astype(F16)


def naive_layer_norm(x, eps=1e-5):
    x = x.astype(F16)
    xm = x - f16_sum(x) / F16(x.shape[-1])
    return xm / np.sqrt(f16_sum(xm * xm) / F16(x.shape[-1]) + F16(eps))


def library(fmt, forward, x):
    """The library's path: the input rounded to fmt, statistics in float64, the output rounded to fmt."""
    if fmt == "bfloat16":
        return to_bf16(forward(to_bf16(x))[0])
    return forward(x.astype(fmt))[0]


def err(y, ref):
    """Worst row's RMS error, on the scale of the output (RMS 1); inf if the output has NaN or inf."""
    if not np.all(np.isfinite(y)):
        return np.inf
    return np.max(np.sqrt(np.mean((y.astype(np.float64) - ref) ** 2, axis=-1)))


def dev_err(y, ref):
    """The error of the part that varies across features, relative to its size."""
    dev = lambda a: a.astype(np.float64) - a.astype(np.float64).mean(axis=-1, keepdims=True)  # noqa: E731
    return np.max(np.sqrt(np.mean((dev(y) - dev(ref)) ** 2, axis=-1)) / np.std(ref, axis=-1))


def welford_var(x):
    mean, m2 = np.zeros(len(x), x.dtype), np.zeros(len(x), x.dtype)
    for j in range(x.shape[1]):
        delta = x[:, j] - mean
        mean += delta / x.dtype.type(j + 1)
        m2 += delta * (x[:, j] - mean)
    return m2 / x.dtype.type(x.shape[1])


def variance_errors(rows, ratios):
    """For rows shifted to mean/std = r, in float32: the max relative error of the variance by one pass
    E[x²]−E[x]², by two passes, by Welford, and of RMSNorm's mean of squares (each against float64); and the
    share of rows whose one-pass variance is <= 0."""
    var = {"one pass E[x²]−E[x]²": [], "two passes": [], "Welford": [], "RMSNorm's mean of squares": []}
    negative = []
    for r in ratios:
        x32 = (rows + r).astype(np.float32)
        ref = x32.astype(np.float64).var(axis=1)
        one = np.mean(x32 * x32, axis=1) - np.mean(x32, axis=1) ** 2
        two = np.mean((x32 - np.mean(x32, axis=1, keepdims=True)) ** 2, axis=1)
        ms_ref = np.mean(x32.astype(np.float64) ** 2, axis=1)
        for key, v, rf in [("one pass E[x²]−E[x]²", one, ref), ("two passes", two, ref),
                           ("Welford", welford_var(x32), ref),
                           ("RMSNorm's mean of squares", np.mean(x32 * x32, axis=1), ms_ref)]:
            var[key].append(np.max(np.abs(v - rf) / rf))
        negative.append(np.mean(one <= 0))
    var = {k: np.array(v) for k, v in var.items()}
    return var, negative


def dtype_sweep(lesson, z, D):
    """Lesson 08's first figure: output error against mean/std per format; returns the means and the curves."""
    forwards = {"LayerNorm": sn.layer_norm_forward, "RMSNorm": sn.rms_norm_forward}
    naive = {"LayerNorm": naive_layer_norm, "RMSNorm": naive_rms_norm}
    means = np.r_[0, np.logspace(-1, 3, lesson.pick(9, 17))]
    curves = {}
    for name, fwd in forwards.items():
        for m in means:
            x = z + m
            ref = fwd(x)[0]
            for fmt in ("float16", "bfloat16", "float32"):
                curves.setdefault((name, fmt), []).append(err(library(fmt, fwd, x), ref))
            with np.errstate(over="ignore", invalid="ignore"):   # the naive float16 path overflows on purpose
                curves.setdefault((name, "naive float16"), []).append(err(naive[name](x), ref))
            curves.setdefault((name, "float16, varying part"), []).append(dev_err(library("float16", fwd, x), ref))
    curves = {k: np.array(v) for k, v in curves.items()}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4), constrained_layout=True)
    x_axis = np.maximum(means, 0.05)
    for ax, name in zip(axes, forwards):
        for fmt, style in [("float32", "o-"), ("float16", "s-"), ("bfloat16", "^-"), ("naive float16", "x--")]:
            ax.loglog(x_axis, np.clip(curves[(name, fmt)], 1e-9, 10), style, ms=4, label=fmt)
        ax.set(title=f"{name}: output error (NaN/inf drawn at 10)", xlabel="mean(x) / std(x)  (0 drawn at 0.05)",
               ylabel="worst row's RMS error of y", ylim=(1e-9, 20))
        ax.legend()
    for name, color in zip(forwards, ("tab:orange", "tab:blue")):
        axes[2].loglog(x_axis, curves[(name, "float16, varying part")], "o-", color=color, ms=4, label=name)
    axes[2].set(title="float16: the part that varies across features", xlabel="mean(x) / std(x)  (0 drawn at 0.05)",
                ylabel="worst row's RMS error of y − mean(y), over std(y)")
    axes[2].legend()
    fig.suptitle(f"Against float64, d = {D}; library: input and output rounded, statistics in float64")
    lesson.save(fig, "dtypes")
    return means, curves
