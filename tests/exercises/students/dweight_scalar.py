"""dweight_reduced_to_scalar: dgamma = np.sum(dout * xhat), with no axis: one number."""
import numpy as np
from closed_form import (batchnorm_backward as _bn, batchnorm_forward, layernorm_backward as _ln,  # noqa: F401
                         layernorm_forward, spatial_groupnorm_backward as _gn, spatial_groupnorm_forward)


def batchnorm_backward(dout, cache):
    dx, _, dbeta = _bn(dout, cache)
    return dx, np.sum(dout * cache[0]), dbeta


def layernorm_backward(dout, cache):
    dx, _, dbeta = _ln(dout, cache)
    return dx, np.sum(dout * cache[0]), dbeta


def spatial_groupnorm_backward(dout, cache):
    dx, _, dbeta = _gn(dout, cache)
    return dx, np.sum(dout * cache[0]), dbeta
