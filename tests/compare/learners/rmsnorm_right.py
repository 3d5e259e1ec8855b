"""A learner's RMSNorm exercise, filled in and right (the stub of `python -m scratchnorm.exercises new rmsnorm`)."""
import numpy as np

EXERCISE = "rmsnorm"


def forward(x, weight, eps):
    rstd = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * rstd * weight


def backward(dy, x, weight, eps):
    rstd = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    x_hat = x * rstd
    g = dy * weight
    dx = rstd * (g - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True))
    dweight = (dy * x_hat).reshape(-1, x.shape[-1]).sum(axis=0)
    return {"x": dx, "weight": dweight}
