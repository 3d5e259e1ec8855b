"""The peer tables (bench/peers.py, grid.py): each row's ratio and threads, and the count each table ends with."""
from __future__ import annotations

import re

import pytest

from scratchnorm.bench import peers, targets
from scratchnorm.bench.grid import grid_table
from scratchnorm.bench.threads import CONFIGS, RECOMMENDED_PARALLEL_MIN

SHAPES = [[64, 512], [8192, 4096]]


def results(times: dict) -> list[dict]:
    """bench_norm-like rows from {(norm, shape, step, impl): seconds}."""
    return [{"norm": n, "shape": list(s), "dtype": "float32", "step": st, "impl": i, "median_s": t}
            for (n, s, st, i), t in times.items()]


def timed(peer_s, ours_impl="numba_out", peer="naive", shapes=SHAPES):
    """Ours 1.0 s at every point, the peer's from ``peer_s`` (a list in point order; None: not measured)."""
    times, k = {}, iter(peer_s)
    for norm in peers.KERNEL_NORMS:
        for shape in map(tuple, shapes):
            for step in peers.KERNEL_STEPS:
                times[norm, shape, step, ours_impl] = 1.0
                t = next(k)
                if t is not None:
                    times[norm, shape, step, peer] = t
    return results(times)


def test_a_row_counts_where_ours_is_at_least_as_fast():
    peer_s = [1.0, 0.999, 2.0, 0.5, 1.5, None, 1.0, 3.0]            # ratio 1 counts; a missing point does not
    rows = peers.kernel_rows(timed(peer_s), "naive", "one", SHAPES)
    assert [r["ratio"] for r in rows] == pytest.approx([1.0, 0.999, 2.0, 0.5, 1.5, None, 1.0, 3.0])
    assert [r["at_least"] for r in rows] == [True, False, True, False, True, False, True, True]
    assert peers.count_line(rows) == "at least as fast at 5 of 8 points (1 not measured)"
    text = peers.kernel_table(rows, "naive", "one")
    assert text.splitlines()[-1] == "at least as fast at 5 of 8 points (1 not measured)"
    assert text.count("BEHIND") == 2


def test_each_row_says_each_sides_threads():
    rows = {key: peers.kernel_rows(timed([1.0] * 8), "naive", key, SHAPES) for key in CONFIGS}
    assert {(r["threads_ours"], r["threads_peer"]) for r in rows["one"]} == {(1, 1)}
    big = 8192 * 4096 >= RECOMMENDED_PARALLEL_MIN > 64 * 512        # the library's rule: serial below the opt-in
    assert big and [(r["shape"], r["threads_ours"], r["threads_peer"]) for r in rows["two"][:4]] == [
        ([64, 512], 1, 2), ([64, 512], 1, 2), ([8192, 4096], 2, 2), ([8192, 4096], 2, 2)]
    numpy_rows = peers.kernel_rows(timed([1.0] * 8, "numba", "numpy"), "numpy", "two", SHAPES)
    assert {r["threads_peer"] for r in numpy_rows} == {1}
    text = peers.kernel_table(rows["two"], "naive", "two")
    assert "two threads, opt-in" in text and f"2 threads from {RECOMMENDED_PARALLEL_MIN} elements" in text
    assert "prange on 2 numba threads" in text


def test_each_peer_is_compared_with_its_own_side():
    """naive against out= (both into kept buffers), torch.compile and NumPy against the allocating call."""
    times = results({("rmsnorm", (64, 512), "forward", "numba_out"): 1.0, ("rmsnorm", (64, 512), "forward", "numba"):
                     2.0, ("rmsnorm", (64, 512), "forward", "naive"): 1.5,
                     ("rmsnorm", (64, 512), "forward", "torch_compile"): 3.0})
    by = {p: peers.kernel_rows(times, p, "one", [[64, 512]])[2]["ratio"] for p in ("naive", "torch_compile")}
    assert by == pytest.approx({"naive": 1.5, "torch_compile": 1.5})


def test_the_grid_table_ends_with_the_count_and_says_the_threads():
    rows = [{"norm": "LayerNorm", "shape": [8192, 4096], "op": op, "ratio": r, "ahead": r >= 1.1}
            for op, r in zip(("forward", "backward", "fwd+bwd"), (0.99, 1.0, 1.2))]
    text = grid_table(rows, CONFIGS["two"])
    assert text.splitlines()[-1] == "at least as fast at 2 of 3 points"
    assert "ahead at 1 of 3 points" in text and "torch.set_num_threads(2)" in text
    assert re.search(r"\nLayerNorm +8192x4096 +2/2 +0\.99", text)


def test_the_targets_count_the_issues_points_from_the_peer_rows():
    n = len(peers.PEER_SHAPES) * 2 * 2
    peer_s = [1.0] * (n - 3) + [0.5] * 3
    report = {"results": [], "layers": [], "threads": {"title": "one thread"},
              "peers": {"kernels": {"naive": peers.kernel_rows(timed(peer_s, shapes=peers.PEER_SHAPES), "naive",
                                                               "one")}}}
    got = {t["name"]: t for t in targets.evaluate_targets(report)}
    naive = got["LayerNorm/RMSNorm points at least as fast as the naive kernel"]
    assert naive["value"] == n - 3 and naive["unit"] == f"of {n}" and naive["status"] == "not met"
    assert naive["where"].startswith("one thread:")
    assert got["LayerNorm/RMSNorm points ahead of torch.compile"]["value"] is None      # not measured
    report["peers"]["kernels"]["naive"].pop()                                          # a point missing
    assert {t["name"]: t for t in targets.evaluate_targets(report)}[naive["name"]]["value"] is None
