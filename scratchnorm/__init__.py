"""scratchnorm: the normalization layers of deep learning, from scratch.

Each normalization has a NumPy reference (readable, beside its equations),
a hand-derived backward, numba kernels that give the same numbers fast
(``backend="numba"``, the default), and a thin layer class:

    layer = scratchnorm.RMSNorm(8, eps=1e-6)
    y  = layer.forward(x)
    dx = layer.backward(dy)      # fills layer.grads

Importing scratchnorm does not import numba or compile anything; the
kernels compile on first use and are cached on disk.
"""
from .add_rmsnorm import add_rms_norm_backward, add_rms_norm_forward
from .batchnorm import (
                        BatchNorm,
                        batch_norm_backward,
                        batch_norm_backward_staged,
                        batch_norm_eval_backward,
                        batch_norm_eval_forward,
                        batch_norm_forward,
                        update_running_stats,
)
from .dyt import DyT, dyt_backward, dyt_forward
from .gated_rmsnorm import (
                        GatedRMSNorm,
                        gated_rms_norm_backward,
                        gated_rms_norm_backward_staged,
                        gated_rms_norm_forward,
)
from .gradcheck import GradcheckReport, gradcheck
from .group_rmsnorm import GroupRMSNorm, group_rms_norm_backward, group_rms_norm_forward
from .groupnorm import GroupNorm, group_norm_backward, group_norm_forward
from .instancenorm import InstanceNorm
from .jacobian import layer_norm_jacobian, linear_rms_norm_dW_via_R, rms_norm_jacobian
from .layer import Layer
from .layernorm import LayerNorm, layer_norm_backward, layer_norm_backward_staged, layer_norm_forward
from .linear import Linear, linear_backward, linear_forward
from .partial_rmsnorm import PartialRMSNorm, partial_count
from .rmsnorm import RMSNorm, rms_norm_backward, rms_norm_backward_staged, rms_norm_forward
from .rmsnorm_variants import GemmaRMSNorm, RMSNormLearnableEps, RMSNormWithBias, SimpleRMSNorm
from .weightnorm import (
                        WeightNormLinear,
                        weight_norm_backward,
                        weight_norm_forward,
                        weight_norm_linear_backward,
                        weight_norm_linear_forward,
)

__version__ = "0.1.0"

__all__ = [
    "GradcheckReport", "GroupRMSNorm", "Layer", "LayerNorm", "Linear", "PartialRMSNorm", "RMSNorm",
    "RMSNormLearnableEps", "RMSNormWithBias", "SimpleRMSNorm", "gradcheck", "group_rms_norm_backward",
    "group_rms_norm_forward", "layer_norm_backward", "layer_norm_backward_staged", "layer_norm_forward",
    "layer_norm_jacobian", "linear_backward", "linear_forward", "linear_rms_norm_dW_via_R",
    "partial_count", "rms_norm_backward", "rms_norm_backward_staged", "rms_norm_forward",
    "rms_norm_jacobian",
    # batch-statistics and grouped normalizations, weight normalization
    "BatchNorm", "GroupNorm", "InstanceNorm", "WeightNormLinear", "batch_norm_backward",
    "batch_norm_backward_staged", "batch_norm_eval_backward", "batch_norm_eval_forward", "batch_norm_forward",
    "group_norm_backward", "group_norm_forward", "update_running_stats", "weight_norm_backward",
    "weight_norm_forward", "weight_norm_linear_backward", "weight_norm_linear_forward",
    # the normalizations of today's models
    "DyT", "GemmaRMSNorm", "add_rms_norm_backward", "add_rms_norm_forward", "dyt_backward", "dyt_forward",
    "GatedRMSNorm", "gated_rms_norm_backward", "gated_rms_norm_backward_staged", "gated_rms_norm_forward",
]
