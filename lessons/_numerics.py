"""One instruction set for the lessons' arithmetic, so that an untimed value has the same bits on every host.

Three libraries the lessons use choose their code for the CPU they find, and the choices round differently:

* numba compiles every kernel for the host CPU, and the sums compiled with ``fastmath={"reassoc"}``
  (scratchnorm/fast/_jit.py, ``jit_sum``) keep as many partial sums as the vector width and unrolling LLVM
  picks for that CPU. On this machine's AMD EPYC (LLVM's "znver5", AVX-512 in 512-bit registers), float64
  RMSNorm's forward and backward give other bits than the same code compiled for an Intel AVX-512 CPU
  ("skylake-avx512", "icelake-server": LLVM's tuning keeps those in 256-bit registers) or for AVX2 alone.
* NumPy dispatches ``np.exp`` and ``np.log`` (among others) to AVX-512 code where the CPU has it, and to
  other code elsewhere: other last bits.
* OpenBLAS picks its matrix-product kernels by CPU family (an AVX-only "Sandybridge" kernel gives other bits
  than the "Haswell" one the AVX2 and AVX-512 hosts share here).

A training run amplifies a difference in the last bit, step after step: lesson 20's "Peri-LN ends at least as
far below the unigram plateau as Pre-LN (lr 0.03)" was 0.0217 (holds) on the AMD host that wrote the ledger,
and 0.01917 (holds only approximately) from a fresh clone elsewhere. On the AMD host, numba compiling for an
Intel AVX-512 CPU (``NUMBA_CPU_NAME=skylake-avx512``, icelake-server, sapphirerapids or x86-64-v4) gives
0.01917031000855447, and for znver3, znver4, haswell or x86-64-v3 (with the host's features) the ledger's
0.021742441047359763; NumPy without its AVX-512 code gives 0.0287, OpenBLAS's Sandybridge kernels 0.0203.

So ``python -m lessons`` runs every lesson with the three pinned to x86-64-v3 (AVX2 and FMA, which every
x86-64 CPU of the last ten years has, Intel's and AMD's): numba compiles for the CPU "x86-64-v3" with that
level's features and no others, NumPy dispatches no further than its X86_V3 group, and OpenBLAS uses its
Haswell kernels. The three read their variables once, when they load, so ``pin`` must run before NumPy or numba
is imported; the runner's worker processes inherit them. What is left to differ between hosts is the C
library's ``exp`` and ``log`` (the same on every glibc host with FMA). On a CPU without x86-64-v3, or another
architecture, nothing is pinned and the runner says so: there the untimed values may differ from the ledger's
in their last digits. ``--native`` skips the pin (kernels for this CPU: the timed lessons' speed on it).
"""
from __future__ import annotations

import os
import sys

PINNED = {"NUMBA_CPU_NAME": "x86-64-v3",        # LLVM's CPU: x86-64-v3's tuning ...
          "NUMBA_CPU_FEATURES": "",             # ... and its own features only (unset: the host's, AVX-512 too)
          "NPY_ENABLE_CPU_FEATURES": "X86_V3",  # NumPy's dispatch up to its X86_V3 group, no AVX-512
          "OPENBLAS_CORETYPE": "Haswell"}       # OpenBLAS's AVX2 + FMA kernels
# x86-64-v3 as /proc/cpuinfo names its features (abm: lzcnt); a host without one of them would fault on the
# pinned code, so it runs the host's instead.
X86_64_V3 = frozenset({"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave",
                       "cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"})
LOADED_TOO_EARLY = ("numpy", "numba")             # they read the variables when they load
DROPPED = ("NPY_DISABLE_CPU_FEATURES",)           # NumPy refuses to start with it beside NPY_ENABLE_CPU_FEATURES


def cpu_flags(cpuinfo: str = "/proc/cpuinfo") -> frozenset:
    """The CPU's feature flags from the first "flags" line of ``cpuinfo`` (empty where there is none)."""
    try:
        with open(cpuinfo, encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def can_pin(flags: frozenset | None = None) -> bool:
    """Whether this host runs x86-64-v3 code (every flag of X86_64_V3 in ``flags``, default: /proc/cpuinfo)."""
    return X86_64_V3 <= (cpu_flags() if flags is None else flags)


def pinned(environ=os.environ) -> bool:
    """Whether ``environ`` carries every pinned variable with its pinned value (and none of DROPPED)."""
    return all(environ.get(name) == value for name, value in PINNED.items()) and not any(
        name in environ for name in DROPPED)


def pin(environ=os.environ, flags: frozenset | None = None, modules=sys.modules) -> bool:
    """Set PINNED in ``environ`` where the host can run it; returns whether the arithmetic is pinned.

    Call it before NumPy and numba are imported (they read the variables once, at import): after, it raises,
    naming them, unless ``environ`` is pinned already."""
    if pinned(environ):
        return True
    early = [name for name in LOADED_TOO_EARLY if name in modules]
    if early:
        raise RuntimeError(f"lessons._numerics.pin: expected to run before {' and '.join(early)} is imported "
                           f"(they read {', '.join(PINNED)} when they load); received a process that imported "
                           f"{' and '.join(early)} already. Fix: call pin() first, or start a new process with "
                           "the variables set (lessons._numerics.PINNED).")
    if not can_pin(flags):
        return False
    for name in DROPPED:
        environ.pop(name, None)
    environ.update(PINNED)
    return True


def describe(environ=os.environ) -> str:
    """One line for the runner's summary: which arithmetic this run used."""
    if pinned(environ):
        return ("numerics: pinned to x86-64-v3 (numba, NumPy's dispatch, OpenBLAS; lessons/_numerics.py): "
                "untimed values are the same bits on any x86-64-v3 host")
    return ("numerics: this host's own (--native, or no x86-64-v3 here; lessons/_numerics.py): untimed values "
            "may differ from a ledger written on another CPU in their last digits")


def restart_pinned(argv: list[str] | None = None) -> None:
    """Run this command again in a pinned process (``os.execv``) if it is not pinned and the host can be;
    returns only when there is nothing to do. For a lesson started as a script, which has imported NumPy by
    the time it reaches the runner."""
    if pinned() or not can_pin():
        return
    env = dict(os.environ)
    pin(env, modules={})            # this process has NumPy loaded; the new one will not, yet
    argv = list(sys.orig_argv[1:] if argv is None else argv)
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, *argv], env)
