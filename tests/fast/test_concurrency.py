"""Threads and forked children: every layer with a kernel, on every threading layer, the same bits.

Each case runs in a subprocess with a time limit, so a crash (numba's workqueue layer aborts
the process on concurrent parallel launches; GNU OpenMP kills a forked child) fails one test,
not the suite. The thresholds are set to 0, so that every call runs a prange kernel (_jit.py).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Builds CASES: name -> zero-argument function giving the bytes of a forward and a backward.
SETUP = textwrap.dedent('''
    import hashlib, sys
    import numpy as np
    import scratchnorm as sn
    from scratchnorm.fast import _jit

    rng = np.random.default_rng(0)
    def case(make, shape):
        x, dy = rng.standard_normal(shape), rng.standard_normal(shape)
        def run():
            layer = make()
            y = layer.forward(x)
            return hashlib.sha256(y.tobytes() + layer.backward(dy).tobytes()).hexdigest()
        return run
    def gated(shape):                     # GatedRMSNorm: two inputs, two gradients
        x, z, dy = (rng.standard_normal(shape) for _ in range(3))
        def run():
            layer = sn.GatedRMSNorm(shape[-1])
            y = layer.forward(x, z)
            return hashlib.sha256(y.tobytes() + b"".join(g.tobytes() for g in layer.backward(dy))).hexdigest()
        return run
    CASES = {"LayerNorm": case(lambda: sn.LayerNorm(256), (512, 256)),
             "RMSNorm": case(lambda: sn.RMSNorm(256), (512, 256)),
             "BatchNorm (N, C)": case(lambda: sn.BatchNorm(256), (512, 256)),
             "BatchNorm (N, C, H, W)": case(lambda: sn.BatchNorm(16), (32, 16, 16, 16)),
             "GroupNorm": case(lambda: sn.GroupNorm(4, 16), (32, 16, 16, 16)),
             "GatedRMSNorm": gated((512, 256))}
    def thresholds(value):
        _jit.PARALLEL_MIN = value
    thresholds(0)                         # every call: a prange kernel (_jit.py) ...
''')

FORK = SETUP + textwrap.dedent('''
    import multiprocessing as mp
    parent = {name: run() for name, run in CASES.items()}         # the parent uses the parallel pool first
    def child(q):
        q.put(({name: run() for name, run in CASES.items()}, _jit._forked))
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start()
    got, forked = q.get(timeout=240)
    p.join(60)
    assert p.exitcode == 0, p.exitcode
    assert forked and not _jit._forked, "the child, and only the child, knows it was forked"
    assert got == parent, {k: (got[k], parent[k]) for k in parent if got[k] != parent[k]}
    print("ok")
''')

THREADS = SETUP + textwrap.dedent('''
    import threading
    thresholds(1 << 62)
    serial = {name: run() for name, run in CASES.items()}     # one thread
    thresholds(0)
    seen, errors = [], []
    def work():
        try:
            for _ in range(3):
                seen.append({name: run() for name, run in CASES.items()})
        except BaseException as exc:          # noqa: BLE001 - reported below
            errors.append(repr(exc))
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(seen) == 12 and all(s == serial for s in seen)
    print("ok")
''')


def layers_here():
    """The threading layers numba can load here: the default and workqueue always; omp and tbb if present."""
    out = ["default", "workqueue"]
    code = ("import numba.np.ufunc.parallel as p, importlib\n"
            "for name in ('omp', 'tbb'):\n"
            "    try:\n"
            "        importlib.import_module(f'numba.np.ufunc.{name}pool'); print(name)\n"
            "    except Exception:\n"
            "        pass\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    return out + done.stdout.split()


def run_script(script, layer=None, disable_jit=False, timeout=400):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("NUMBA_THREADING_LAYER", None)
    if layer not in (None, "default"):
        env["NUMBA_THREADING_LAYER"] = layer
    env["NUMBA_DISABLE_JIT"] = "1" if disable_jit else "0"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), \
        f"exit {done.returncode} ({layer=}, {disable_jit=}):\n{done.stdout[-1000:]}\n{done.stderr[-3000:]}"


LAYERS = layers_here()


@pytest.mark.parametrize("layer", LAYERS)
def test_a_forked_child_works_and_gives_the_same_bits(layer):
    run_script(FORK, layer)


def test_a_forked_child_works_without_the_jit():
    run_script(FORK, disable_jit=True)


@pytest.mark.parametrize("layer", LAYERS)
def test_threads_at_once_are_safe_and_give_the_serial_bits(layer):
    run_script(THREADS, layer)
