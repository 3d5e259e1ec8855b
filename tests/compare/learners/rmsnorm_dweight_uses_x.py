"""A learner's RMSNorm exercise whose dweight sums dy * x instead of dy * x_hat."""
import numpy as np

EXERCISE = "rmsnorm"


def forward(x, weight, eps):
    rstd = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * rstd * weight


def backward(dy, x, weight, eps):
    rstd = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    x_hat, g = x * rstd, dy * weight
    dx = rstd * (g - x_hat * np.mean(g * x_hat, axis=-1, keepdims=True))
    return {"x": dx, "weight": (dy * x).reshape(-1, x.shape[-1]).sum(axis=0)}
