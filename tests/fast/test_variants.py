"""The variants' kernels (scratchnorm/fast/variants.py), called directly, against the NumPy reference.

The layers reach these kernels only for the variants (eps outside or clamped, pRMSNorm, a bias on
RMSNorm, SimpleRMSNorm, GroupRMSNorm, the fused add) and for LayerNorm's rare calls that its own
kernel does not take (no rows, a weight float32 cannot hold). Here every case of test_kernels.py,
LayerNorm and RMSNorm with default options included, runs through them, with test_kernels.py's
tolerances (y of float32 x within 8 float32 roundings of |x_hat w| + |b|). The knobs are run-time
arguments: one compiled forward and backward per dtype serve every variant. Also run under
NUMBA_DISABLE_JIT.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest
from layer_helpers import run_jitted
from test_kernels import IDS, VARIANTS, compare, make_inputs



def _shape(kw, shape):
    G = kw.get("num_groups", 1)
    return shape[:-1] + (shape[-1] + (-shape[-1]) % G,)


@pytest.mark.parametrize("label,name,kw,has_w,has_b", VARIANTS, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [9, 40])
def test_the_variants_kernels_match_the_reference(label, name, kw, has_w, has_b, dtype, rows):
    """9 rows: one chunk; 40: three (chunks.n_chunks), whose partial dweight, dbias are added in order."""
    x, dy, w, b = make_inputs(_shape(kw, (rows, 40)), dtype, seed=61, has_weight=has_w, has_bias=has_b)
    compare(name, x, dy, w, b, kw, label, backend="variants")


def test_one_compiled_kernel_serves_every_variant():
    """In a fresh process: LayerNorm (centered), RMSNorm outside, pRMSNorm clamped with a bias,
    GroupRMSNorm, all on float64 x and parameters, compile one forward and one backward (the knobs are
    run-time arguments, not one compilation each)."""
    code = textwrap.dedent("""
        import numpy as np
        from scratchnorm.fast import variants as v
        rng = np.random.default_rng(65)
        x, dy, w, b = (rng.standard_normal(s) for s in ((20, 24), (20, 24), 24, 24))
        for fwd, bwd, args, kw in ((v.layer_norm_forward, v.layer_norm_backward, (w, b), {}),
                                   (v.rms_norm_forward, v.rms_norm_backward, (w,), {"eps_mode": "outside"}),
                                   (v.rms_norm_forward, v.rms_norm_backward, (w, b), {"eps_mode": "clamp", "k": 5}),
                                   (v.group_rms_norm_forward, v.group_rms_norm_backward, (w,), {"num_groups": 4})):
            bwd(dy, fwd(x, *args, **kw)[1])
        print(len(v.FORWARD_ROWS[0].signatures), len(v.BACKWARD_ROWS[0].signatures))
    """)
    assert run_jitted(code).split() == ["1", "1"]
