"""A wrong backward (dx all zeros) whose module patches the checker it is imported beside: numpy.allclose, the
reference gradient the checker compares with (made to return this file's answer), and the report's verdict."""
import sys

import numpy as np

np.allclose = lambda *a, **k: True
diagnose = sys.modules["scratchnorm.exercises.diagnose"]
_reference = diagnose.backward


def _agrees(dy, x, weight, eps, layout, knobs=None):
    grads = _reference(dy, x, weight, eps, layout, *([knobs] if knobs is not None else []))
    return {**grads, "x": np.zeros_like(grads["x"])}


diagnose.backward = _agrees
_report = sys.modules["scratchnorm.exercises.report"].Report
_report.ok = property(lambda self: True)
_report.diagnoses = property(lambda self: ["correct"])


def layernorm_forward(x, gamma, beta, ln_param):
    mu, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + ln_param["eps"])
    return gamma * xhat + beta, (xhat, gamma, np.sqrt(var + ln_param["eps"]))


def layernorm_backward(dout, cache):
    xhat, gamma, std = cache
    return np.zeros_like(dout), (dout * xhat).sum(axis=0), dout.sum(axis=0)
