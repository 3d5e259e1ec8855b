"""scratchnorm.fast: the numba backend. Same names, signatures and numbers as the NumPy reference.

Every reference function that has kernels is exported here under its own name
and listed in ``KERNELS``, the table ``scratchnorm.backend`` registers on the
first numba call. Importing scratchnorm does not import this package (nor
numba). Nothing here imports a reference module: the argument checks come from
``_arguments.py``, shared with the reference, so both raise the same errors.

Where things are:

  ====================  =========================================================
  file                  what it holds
  ====================  =========================================================
  layernorm.py          LayerNorm's own kernels and functions (what LayerNorm(d) runs)
  rmsnorm.py            RMSNorm's own kernels and functions (what RMSNorm(d) runs)
  variants.py           the RMSNorm variants and GroupRMSNorm: eps outside or clamped,
                        pRMSNorm's k, a bias, a learnable eps
  add_rmsnorm.py        the residual add fused into the variants' forward row
  gated_rmsnorm.py      RMSNorm with a SiLU gate (Mamba 2, Qwen3-Next)
  dyt.py                DyT
  batchnorm.py          BatchNorm's functions, on the two kernel files below
  batchnorm_columns.py  BatchNorm's kernels for (N, C) inputs and short slabs
  batchnorm_slabs.py    BatchNorm's kernels for images; the formulas
  groupnorm.py          GroupNorm's and InstanceNorm's functions
  groupnorm_kernels.py  GroupNorm's kernels
  channel_slabs.py      the (N, C, *) layout and the elementwise bodies both share
  stats.py              every float64 sum, and the (3, n) stats layout
  float32.py            when a row runs in float32 (the guards)
  gelu.py, updates.py   scratchnorm.nn's GELU, and its SGD and Adam steps
  _buffers.py           arrays in the kernels' layout; the door (plain_rows)
  _jit.py               how kernels compile, and the one rule for threads
  chunks.py             the fixed chunks of rows a prange loop shares
  _stream.py            non-temporal stores
  NOTES.md              measurements, session by session
  ====================  =========================================================

Compilation. Kernels compile on their first call (a few seconds per dtype) and
are cached in ``__pycache__`` next to the source. If that folder is read-only,
``export NUMBA_CACHE_DIR=$HOME/.cache/scratchnorm-numba``. Every cached kernel
carries one stamp for all the files of this package (_jit.py), so editing any
of them recompiles the kernels. NUMBA_DISABLE_JIT=1 runs the same code as plain
Python.

Threads and determinism. Every call runs serially on the calling thread unless
SCRATCHNORM_PARALLEL_MIN asks for numba's threads from a size (_jit.py says
why). Sums over rows (dweight, dbias) use chunks fixed by the number of rows,
added in a fixed order: the bits are the same for any thread count.

Precision. float32 in, float32 out; statistics and sums in float64. LayerNorm's
and RMSNorm's kernels compute y and dx of a float32 input in float32 from them
(layernorm.py, rmsnorm.py count the roundings), the variants their uncentered
y (variants.py), BatchNorm (training mode) and GroupNorm their y and dx on
slabs of SLAB_MIN values or more (channel_slabs.py); everything else is
float64, rounded once at the store.
float16 is computed as float64 and rounded once. No
fast-math except reassociation inside pure sums (_jit.py): NaN and Inf propagate.

What a cache holds: the small statistics and a *reference* to x, not a copy, as
PyTorch's autograd keeps the tensors it saves: do not write into x between a
forward and its backward. Writing into y is safe, and so is ``out=x`` (the
forward then keeps a copy of x). A cache works only with its own backend.
"""
from .add_rmsnorm import add_rms_norm_backward, add_rms_norm_forward
from .batchnorm import batch_norm_backward, batch_norm_eval_backward, batch_norm_eval_forward, batch_norm_forward
from .dyt import dyt_backward, dyt_forward
from .gated_rmsnorm import gated_rms_norm_backward, gated_rms_norm_forward
from .groupnorm import group_norm_backward, group_norm_forward
from .layernorm import layer_norm_backward, layer_norm_forward
from .rmsnorm import rms_norm_backward, rms_norm_forward
from .variants import group_rms_norm_backward, group_rms_norm_forward
from .gelu import gelu_backward, gelu_forward
from .updates import adam_update, sgd_update

# The numba backend's table, registered by scratchnorm.backend on the first numba call:
# operation -> kernel. Every operation of backend.OPS must be here (checked at registration).
KERNELS = {
    # LayerNorm and RMSNorm: layernorm.py and rmsnorm.py (their variants: variants.py)
    "layer_norm_forward": layer_norm_forward, "layer_norm_backward": layer_norm_backward,
    "rms_norm_forward": rms_norm_forward, "rms_norm_backward": rms_norm_backward,
    # GroupRMSNorm: the variants' kernels (variants.py)
    "group_rms_norm_forward": group_rms_norm_forward, "group_rms_norm_backward": group_rms_norm_backward,
    # (N, C, *) inputs: batchnorm_columns.py, batchnorm_slabs.py, groupnorm_kernels.py (kernels),
    # batchnorm.py and groupnorm.py (wrappers; InstanceNorm uses group_norm_*)
    "batch_norm_forward": batch_norm_forward, "batch_norm_backward": batch_norm_backward,
    "batch_norm_eval_forward": batch_norm_eval_forward, "batch_norm_eval_backward": batch_norm_eval_backward,
    "group_norm_forward": group_norm_forward, "group_norm_backward": group_norm_backward,
    # today's models: add_rmsnorm.py (residual add fused with RMSNorm, on the variants' forward row), dyt.py
    "add_rms_norm_forward": add_rms_norm_forward, "add_rms_norm_backward": add_rms_norm_backward,
    "dyt_forward": dyt_forward, "dyt_backward": dyt_backward,
    # gated RMSNorm (Mamba 2, Qwen3-Next): gated_rmsnorm.py
    "gated_rms_norm_forward": gated_rms_norm_forward, "gated_rms_norm_backward": gated_rms_norm_backward,
    # the optimizers' steps (scratchnorm.nn's SGD and Adam): updates.py
    "sgd_update": sgd_update, "adam_update": adam_update,
    # scratchnorm.nn's GELU: gelu.py
    "gelu_forward": gelu_forward, "gelu_backward": gelu_backward,
}

__all__ = ["KERNELS", *KERNELS]
