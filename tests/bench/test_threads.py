"""Thread for thread (bench/threads.py, issue 50): one place sets every side's threads, and the twenty-line
kernel compiled serial gives the prange kernel's numbers."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from scratchnorm.bench import cli, naive, norms, runner, threads
from scratchnorm.bench.threads import CONFIGS, RECOMMENDED_PARALLEL_MIN, VARIABLE
from scratchnorm.fast import _jit

BENCH = Path(runner.__file__).parent
README = Path(runner.__file__).parents[2] / "README.md"


class Pool:
    """numba's or torch's thread-count interface; ``obeys=False`` keeps its count whatever it is told."""

    def __init__(self, n=2, obeys=True):
        self.n, self.obeys = n, obeys

    def set_num_threads(self, n):
        if self.obeys:
            self.n = n

    def get_num_threads(self):
        return self.n


def fake_numba(n=2, top=2):
    pool = Pool(n)
    pool.config = type("config", (), {"NUMBA_NUM_THREADS": top})
    return pool


@pytest.fixture
def as_imported(monkeypatch):
    """Pretend this process imported the library with ``config``'s SCRATCHNORM_PARALLEL_MIN."""
    def set_to(config):
        monkeypatch.setattr(_jit, "PARALLEL_MIN", _jit.parallel_min(threads.environ_for(config)))
    return set_to


@pytest.mark.parametrize("key", CONFIGS)
def test_apply_sets_numba_and_torch_together_and_reads_them_back(key, as_imported):
    config = CONFIGS[key]
    as_imported(config)
    numba, torch = fake_numba(n=7, top=8), Pool(5)
    got = threads.apply(config, numba, torch)
    assert numba.n == torch.n == config.threads
    assert got["threads"] == {"numba": config.threads, "torch": config.threads}
    assert got["naive_kernel"] == ("prange" if config.threads > 1 else "serial")
    assert got["parallel_min"] == config.parallel_min


@pytest.mark.parametrize("side", ["numba", "torch"])
def test_a_side_left_on_other_threads_is_an_error_before_any_timing(side, as_imported):
    """A row that sets one side's threads and not the other's is not a comparison: apply raises."""
    config = CONFIGS["one"]
    as_imported(config)
    numba, torch = fake_numba(n=2), Pool(2)
    (numba if side == "numba" else torch).obeys = False
    with pytest.raises(RuntimeError, match=rf"expected 1 on every side; received \{{'{side}': 2\}}.*Fix: set every"):
        threads.apply(config, numba, torch)


def test_apply_refuses_a_process_that_imported_another_parallel_min(as_imported):
    as_imported(CONFIGS["one"])                          # imported with the variable unset ...
    with pytest.raises(RuntimeError, match=r"configuration 'two'.*Fix: run `python -m scratchnorm.bench --config two`"):
        threads.apply(CONFIGS["two"], fake_numba(), Pool())     # ... cannot be graded as the opt-in


def test_apply_names_a_numba_pool_too_small(as_imported):
    as_imported(CONFIGS["two"])
    with pytest.raises(RuntimeError, match="at least 2 numba threads.*NUMBA_NUM_THREADS=1"):
        threads.apply(CONFIGS["two"], fake_numba(n=1, top=1), Pool())


def test_the_context_sets_its_threads_through_apply_alone(monkeypatch):
    """runner.Context: the configuration's threads on numba (and torch, when loaded) by threads.apply."""
    import numba

    calls = []
    real = runner.apply
    monkeypatch.setattr(runner, "apply", lambda config, numba, torch: calls.append((config, torch)) or real(
        config, numba, torch))
    before = numba.get_num_threads()
    try:
        ctx = runner.Context(cli.parse_args(["--quick", "--compare", "none"]))
        assert calls == [(CONFIGS["one"], None)] and ctx.threads == 1
        assert ctx.numba.get_num_threads() == 1 and ctx.sides["threads"]["numba"] == 1
    finally:
        numba.set_num_threads(before)


def test_no_other_bench_module_sets_a_thread_count():
    """One place: threads.py. stalls.py times the default call against itself on one thread (not a peer
    comparison), memory.py's torch probe runs in its own process with the context's count."""
    setters = {p.name for p in BENCH.glob("*.py") if re.search(r"set_num_threads\(", p.read_text())}
    assert setters == {"threads.py", "stalls.py", "memory.py"}, setters


def test_the_naive_peer_follows_the_configuration(monkeypatch, as_imported):
    got = []
    monkeypatch.setattr(runner, "naive_steps", lambda norm, inp, parallel: got.append(parallel))
    for key in CONFIGS:
        ctx = runner.Context.__new__(runner.Context)
        ctx.config, ctx.numba, ctx.torch, ctx.jax = CONFIGS[key], True, None, None
        inp = norms.make_inputs(norms.NORMS["rmsnorm"], (4, 8), "float32")
        ctx.builders(norms.NORMS["rmsnorm"], inp)["naive"]()
    assert got == [False, True]


def test_environ_for_sets_or_removes_the_variable():
    env = {"PATH": "/bin", VARIABLE: "7"}
    assert threads.environ_for(CONFIGS["one"], env) == {"PATH": "/bin"}
    assert threads.environ_for(CONFIGS["two"], env) == {"PATH": "/bin", VARIABLE: str(RECOMMENDED_PARALLEL_MIN)}


def test_the_opt_in_is_the_value_the_readme_recommends_for_large_calls_run_alone():
    threads_section = README.read_text().split("**Threads: one rule.**")[1].split("\n- **")[0]
    said = re.search(r"set `SCRATCHNORM_PARALLEL_MIN=(\d+)`[^.]*when your large calls run alone",
                     threads_section.replace("\n", " ").replace("  ", " "))
    assert said and int(said.group(1)) == RECOMMENDED_PARALLEL_MIN


def test_the_command_line_runs_itself_again_with_the_configurations_variable(monkeypatch):
    seen = []

    def run(cmd, env):
        seen.append((cmd, env))
        return type("proc", (), {"returncode": 0})

    monkeypatch.setattr(cli.subprocess, "run", run)
    monkeypatch.setattr(cli, "in_this_process", lambda config: False)
    monkeypatch.delenv(cli.RERUN, raising=False)
    argv = ["--peers", "--quick", "--config", "two"]
    assert cli.main(argv) == 0
    (cmd, env), = seen
    assert cmd[1:] == ["-m", "scratchnorm.bench", *argv]
    assert env[VARIABLE] == str(RECOMMENDED_PARALLEL_MIN) and env[cli.RERUN] == "1"
    monkeypatch.setenv(cli.RERUN, "1")                  # the new interpreter read another value: no loop
    with pytest.raises(RuntimeError, match="reads SCRATCHNORM_PARALLEL_MIN at import"):
        cli.main(argv)
    assert len(seen) == 1


def test_serial_and_prange_are_one_source_compiled_apart():
    for serial, prange in zip(naive.SERIAL, naive.PRANGE):
        assert serial.py_func.__code__ is prange.py_func.__code__                 # one kernel text
        assert serial.targetoptions["parallel"] is False and prange.targetoptions["parallel"] is True
        assert serial.py_func.__qualname__ != prange.py_func.__qualname__         # two disk-cache entries


@pytest.mark.parametrize("name", naive.NAIVE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_serial_kernel_gives_the_prange_kernels_numbers_row_by_row(name, dtype):
    """Each row of y and dx, and each column of dweight (and dbias): the same up to where the float64 row sums
    may be added in another order (fastmath reassoc, vectorized apart in the two compilations): the sums'
    2 d eps64 relative, then one rounding to the dtype on each side. The row's scale is the terms' sizes."""
    norm = norms.NORMS[name]
    shape = (70, 333)                                        # a d that leaves a vector tail
    inp = norms.make_inputs(norm, shape, dtype, seed=3)
    inp.x[5] += 40.0                                         # one row with a large mean
    runs = [naive.naive_steps(norm, inp, parallel=p) for p in (False, True)]
    for r in runs:
        r["fwd+bwd"]()
    serial, prange = runs
    d = shape[1]
    rel = 2 * np.finfo(dtype).eps + 2 * d * np.finfo(np.float64).eps
    x = inp.x.astype(np.float64)
    w = inp.params["weight"].astype(np.float64)
    mean = x.mean(-1, keepdims=True) if name == "layernorm" else 0.0
    rstd = 1 / np.sqrt(((x - mean) ** 2).mean(-1, keepdims=True) + norm.eps)
    x_hat, g = (x - mean) * rstd, inp.dy * w
    bias = np.abs(inp.params.get("bias", np.zeros(d)))
    y_scale = np.max(np.abs(x_hat * w) + bias, -1, keepdims=True)
    dx_scale = rstd * np.max(np.abs(g) + np.abs(g).mean(-1, keepdims=True)
                             + np.abs(x_hat) * np.abs(g * x_hat).mean(-1, keepdims=True), -1, keepdims=True)
    assert np.all(np.abs(serial["y"] - prange["y"]) <= rel * y_scale), name
    assert np.all(np.abs(serial["grads"]["x"] - prange["grads"]["x"]) <= rel * dx_scale), name
    column_scale = {"weight": np.abs(inp.dy * x_hat).sum(0), "bias": np.abs(inp.dy).sum(0)}
    for key in serial["grads"]:
        if key != "x":
            assert np.all(np.abs(serial["grads"][key] - prange["grads"][key]) <= rel * column_scale[key]), key
