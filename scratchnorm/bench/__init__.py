r"""python -m scratchnorm.bench: how fast is each normalization, against memory bandwidth?

    python -m scratchnorm.bench                                   # everything available
    python -m scratchnorm.bench --norms layernorm,rmsnorm --shapes 4096x1024 --dtypes float32
    python -m scratchnorm.bench --quick --json bench.json         # tiny shapes, few repeats
    python -m scratchnorm.bench --grid                            # only the grid against torch.nn
    python -m scratchnorm.bench --peers --config one              # the peers, thread for thread: one thread
    python -m scratchnorm.bench --peers --config two              # the opt-in against peers on two threads

A full run takes several minutes (the NumPy reference at 8192x4096 is slow); --quick takes
seconds, about half a minute with torch and jax and the first-call subprocesses
(--no-compile skips them).

What is measured, in one process, as medians of timed calls after a warm-up:

* the roofline (``roofline.py``): the same-size copy, ``np.copyto`` and a parallel numba
  loop ("copy", the faster of the two), and a copy with non-temporal stores ("streamed");
* forward, backward and forward+backward of every normalization (``norms.py``): the NumPy
  reference, the numba kernels allocating and with ``out=``, and torch and JAX from the same
  formulas when they are installed (``compare.py``), in interleaved rounds (``runner.py``);
* LayerNorm and RMSNorm through the layer classes against torch.nn (both allocating), and the
  forward with float64 (the default) against float32 parameters;
* the residual add fused with RMSNorm against the add then the norm, float32 forward, with the
  bytes each moves (``fused.py``; when rmsnorm and float32 are in the run);
* the first call in a fresh process, with an empty and a filled numba cache, and the first training step
  of a fresh process the same two ways (``first_call.py``; ``--first-step``: only the step);
* the peak extra memory of a forward+backward (``memory.py``);
* whole training steps of a learner's script (``fresh.py``; ``--fresh``: only them; ``--no-fresh``:
  not them): each model and backend in a new interpreter, every step from the second, p50 and p90
  per backend, quiet and with one core busy;
* the targets (``targets.py``), as benchmark figures, never as tests;
* the grid (``grid.py``), when torch is installed (``--grid``: only it; ``--no-grid``: not it):
  LayerNorm, RMSNorm, BatchNorm and GroupNorm through the layer classes with default arguments
  against torch.nn's, forward, backward and both, at the shapes of the performance issue, as the
  ratio torch time / ours at every point.

Thread for thread (``threads.py``): ``--config one`` (the default) sets numba's and torch's threads to 1
for every section and compares the library's serial build with the twenty-line kernel compiled serial;
``--config two`` sets both to 2, runs the library with SCRATCHNORM_PARALLEL_MIN at the README's opt-in
(the bench starts itself again in a new interpreter when the variable differs, as it is read at import)
and compares it with the prange kernel. The peer tables (``peers.py``; ``--peers``: only them, at the
issue's four shapes) each say how many threads each side ran and end with "at least as fast at K of M
points". The stall check compares threads with one thread, so ``--config one`` skips it in a full run.

The report (``report.py``, which also gives the JSON's shape) prints each figure's median, its
effective bandwidth and its share of the copy's, and ratios against the numba time.

The modules, small and named for what they hold: ``timing.py`` and ``roofline.py`` are the
measurement primitives (lessons use them), ``cli.py`` the command line. A norm, backend or
comparison that is missing (torch or jax not installed) is skipped with a note.
"""
