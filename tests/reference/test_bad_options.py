"""Bad values of the drop-in options (issue 28), in the style of test_bad_inputs.py: each raises the
expected error type, at construction where it can, with a message that starts with the argument's name,
shows the value received, and has the four parts (expected, received, Fix)."""
from __future__ import annotations

import numpy as np
import pytest
from layer_helpers import clear_message

import scratchnorm as sn
from scratchnorm import fast, nn

X, R = np.ones((2, 6)), np.ones((2, 6))
BUF = np.empty((3, 6))              # out= and h_out= views of one buffer: the same rows, or one row shared


def _fused(backend):
    return sn if backend == "numpy" else fast


ROWS = [
    # (what, action(backend), error, argument, received)
    ("normalized_shape empty", lambda b: sn.RMSNorm((), backend=b), TypeError, "d", "()"),
    ("normalized_shape a zero axis", lambda b: sn.LayerNorm((3, 0), backend=b), ValueError, "d[1]", "0"),
    ("normalized_shape of floats", lambda b: sn.RMSNorm((3.0, 4), backend=b), TypeError, "d[0]", "3.0"),
    ("trailing axes swapped", lambda b: sn.RMSNorm((3, 4), backend=b).forward(np.ones((2, 4, 3))), ValueError,
     "x", "(2, 4, 3)"),
    ("too few axes", lambda b: sn.LayerNorm((2, 3, 4), backend=b).forward(np.ones((3, 4))), ValueError, "x", "(3, 4)"),
    ("promote with cast gemma", lambda b: sn.RMSNorm(6, promote=True, backend=b), ValueError, "promote", "True"),
    ("promote not a bool", lambda b: sn.RMSNorm(6, cast="llama", promote="yes", backend=b), TypeError, "promote",
     "'yes'"),
    ("eps None, learnable eps", lambda b: sn.RMSNormLearnableEps(6, eps=None, backend=b), TypeError, "eps", "None"),
    ("eps None, LayerNorm", lambda b: sn.LayerNorm(6, eps=None, backend=b), TypeError, "eps", "None"),
    ("GemmaRMSNorm affine not a bool", lambda b: sn.GemmaRMSNorm(6, elementwise_affine="no", backend=b), TypeError,
     "elementwise_affine", "'no'"),
    ("BatchNorm bias not a bool", lambda b: sn.BatchNorm(4, bias="no", backend=b), TypeError, "bias", "'no'"),
    ("GroupNorm bias not a bool", lambda b: sn.GroupNorm(2, 4, bias=1, backend=b), TypeError, "bias", "1"),
    ("InstanceNorm bias not a bool", lambda b: sn.InstanceNorm(4, bias=None, backend=b), TypeError, "bias", "None"),
    ("DyT bias not a bool", lambda b: sn.DyT(6, bias=0, backend=b), TypeError, "bias", "0"),
    ("InstanceNorm momentum > 1", lambda b: sn.InstanceNorm(4, momentum=2.0, backend=b), ValueError, "momentum",
     "2.0"),
    ("InstanceNorm tracking not a bool", lambda b: sn.InstanceNorm(4, track_running_stats="yes", backend=b),
     TypeError, "track_running_stats", "'yes'"),
    ("InstanceNorm spatial_dims 0", lambda b: sn.InstanceNorm(4, spatial_dims=0, backend=b), ValueError,
     "spatial_dims", "0"),
    ("InstanceNorm input of the wrong rank for spatial_dims",
     lambda b: sn.InstanceNorm(4, spatial_dims=2, backend=b).forward(np.ones((4, 5))), ValueError, "x", "(4, 5)"),
    ("InstanceNorm unbatched, wrong channels",
     lambda b: sn.InstanceNorm(4, spatial_dims=1, backend=b).forward(np.ones((3, 5))), ValueError, "x", "(3, 5)"),
    ("GatedRMSNorm norm_before_gate not a bool", lambda b: sn.GatedRMSNorm(6, norm_before_gate="yes", backend=b),
     TypeError, "norm_before_gate", "'yes'"),
    ("GatedRMSNorm num_groups not dividing", lambda b: sn.GatedRMSNorm(6, num_groups=4, backend=b), ValueError,
     "num_groups", "4"),
    ("GatedRMSNorm gate of another shape", lambda b: sn.GatedRMSNorm(6, backend=b).forward(X, np.ones((2, 5))),
     ValueError, "gate", "(2, 5)"),
    ("GatedRMSNorm integer gate", lambda b: sn.GatedRMSNorm(6, backend=b).forward(X, np.ones((2, 6), int)),
     TypeError, "gate", "int64"),
    ("GatedRMSNorm wrong d", lambda b: sn.GatedRMSNorm(6, backend=b).forward(np.ones((2, 5)), np.ones((2, 5))),
     ValueError, "x", "(2, 5)"),
    ("qk_norm_over unknown", lambda b: nn.CausalSelfAttention(8, 2, "rmsnorm", "per_token", backend=b), ValueError,
     "qk_norm_over", "'per_token'"),
    ("gemma QK-Norm with a weight per head", lambda b: nn.CausalSelfAttention(8, 2, "gemma_rmsnorm",
                                                                              "head_separate_weights", backend=b),
     ValueError, "qk_norm", "'gemma_rmsnorm'"),
    ("qk_norm unknown", lambda b: nn.CausalSelfAttention(8, 2, "gemma", backend=b), ValueError, "qk_norm", "'gemma'"),
    ("parallel with post-norm", lambda b: nn.Transformer(7, 8, 2, 1, 6, placement="post", parallel=True, backend=b),
     ValueError, "parallel", "True"),
    ("parallel without a norm", lambda b: nn.Transformer(7, 8, 2, 1, 6, None, parallel=True, backend=b),
     ValueError, "parallel", "True"),
    ("ParallelResidual mlp not a layer", lambda b: nn.ParallelResidual(nn.ReLU(backend=b), "mlp",
                                                                       sn.LayerNorm(4, backend=b)),
     TypeError, "mlp", "'mlp'"),
    ("fused add, unknown cast", lambda b: _fused(b).add_rms_norm_forward(X, R, None, cast="bf16"), ValueError, "cast",
     "'bf16'"),
    ("fused add, offset nan", lambda b: _fused(b).add_rms_norm_forward(X, R, None, offset=float("nan")), ValueError,
     "offset", "nan"),
    ("fused add, offset a string", lambda b: _fused(b).add_rms_norm_forward(X, R, None, offset="1"), ValueError,
     "offset", "'1'"),
    ("fused add, out is h_out", lambda b: _fused(b).add_rms_norm_forward(X, R, None, out=BUF[:2], h_out=BUF[:2]),
     ValueError, "h_out", "overlaps out"),
    ("fused add, out overlaps h_out", lambda b: _fused(b).add_rms_norm_forward(X, R, None, out=BUF[:2],
                                                                               h_out=BUF[1:]),
     ValueError, "h_out", "overlaps out"),
]


@pytest.mark.parametrize("what,action,exc,arg,received", ROWS, ids=[r[0] for r in ROWS])
def test_bad_option_fails_loudly(what, action, exc, arg, received, backend):
    with pytest.raises(exc) as e:
        action(backend)
    msg = clear_message(e.value)
    assert msg.split(":")[0] == arg, msg
    assert received in msg, msg
