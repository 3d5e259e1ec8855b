"""A learner's RMSNorm exercise whose backward forgets the path through the mean square."""
import numpy as np

EXERCISE = "rmsnorm"


def forward(x, weight, eps):
    rstd = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * rstd * weight


def backward(dy, x, weight, eps):
    rstd = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    dx = rstd * dy * weight                                  # only the direct path
    dweight = (dy * x * rstd).reshape(-1, x.shape[-1]).sum(axis=0)
    return {"x": dx, "weight": dweight}
