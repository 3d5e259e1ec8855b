"""gradcheck itself: it passes every layer, and it fails wrong backward passes."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import scratchnorm as sn
from scratchnorm.gradcheck.cases import all_cases

CASES = all_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.label for c in CASES])
def test_every_layer_passes_gradcheck(case, backend):
    layer, report = case.check(backend)
    assert report.ok, str(report)
    assert report.max_rel_err < report.checks[0].tol / 5, f"less than a factor 5 below the tolerance:\n{report}"
    # the resolution is relative to the largest gradient (absolute where the gradient is 0: LayerNorm(1)'s dx)
    assert all(0 < c.resolution < c.tol and c.err_over_res <= 10 for c in report.checks), str(report)
    assert {c.name for c in report.checks} == ({"x"} if case.check_x else set()) | set(layer.params)


def test_gradcheck_catches_the_missing_mean_term(rng):
    """A LayerNorm backward that drops -mean(g) (the classic slip) must fail."""
    def wrong_backward(dy, cache):
        g, x_hat, rstd = dy, cache["x_hat"], cache["rstd"]
        return {"x": rstd * (g - x_hat * np.mean(g * x_hat, -1, keepdims=True))}

    x = rng.standard_normal((3, 6)) + 1.0
    good = sn.gradcheck((sn.layer_norm_forward, sn.layer_norm_backward), x)
    bad = sn.gradcheck((sn.layer_norm_forward, wrong_backward), x)
    assert good.ok and not bad.ok
    assert bad["x"].n_bad > 0 and bad["x"].max_rel_err > 1e-3


def _layer_norm_backward_eps_dropped(dy, cache):
    """The backward recomputes rstd = 1 / sqrt(var), without eps: about eps / (2 var) = 5e-6 off at eps = 1e-5."""
    xm, var, weight = cache["xm"], cache["var"], cache["weight"]
    rstd = 1 / np.sqrt(var)
    x_hat = xm * rstd
    g = dy * weight
    dx = rstd * (g - g.mean(-1, keepdims=True) - x_hat * (g * x_hat).mean(-1, keepdims=True))
    return {"x": dx, "weight": (dy * x_hat).sum(0), "bias": dy.sum(0)}


def _layer_norm(x, weight, bias):
    return sn.layer_norm_forward(x, weight, bias, eps=1e-5)


@pytest.mark.parametrize("seed", range(3))
def test_gradcheck_catches_eps_dropped_in_the_backward(seed):
    """5e-6 is inside the fixed tol = 1e-5: only the estimated resolution sees it."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, 8))
    x = (x - x.mean(-1, keepdims=True)) / x.std(-1, keepdims=True) + rng.standard_normal((4, 1))   # var = 1
    params = {"weight": rng.standard_normal(8), "bias": rng.standard_normal(8)}
    good = sn.gradcheck((_layer_norm, sn.layer_norm_backward), x, params=params)
    bad = sn.gradcheck((_layer_norm, _layer_norm_backward_eps_dropped), x, params=params)
    assert good.ok, str(good)
    assert not bad["x"].ok and not bad["weight"].ok and bad["bias"].ok, str(bad)
    # dweight is 5e-6 off: the fixed tol alone would pass it, the resolution (about 1e-9) does not
    assert 1e-6 < bad["weight"].max_rel_err < bad["weight"].tol and bad["weight"].err_over_res > 100, str(bad)
    for c in good.checks:
        assert c.resolution < 1e-7 and c.err_over_res <= 10, str(good)   # a layer resolves far below 5e-6
    assert "resolution" in str(bad) and "err/res" in str(bad)


def test_gradcheck_catches_a_wrong_parameter_gradient(rng):
    def wrong_backward(dy, cache):
        grads = sn.rms_norm_backward(dy, cache)
        grads["weight"] = grads["weight"] * 1.001
        return grads

    x, w = rng.standard_normal((3, 5)), rng.standard_normal(5)
    report = sn.gradcheck((sn.rms_norm_forward, wrong_backward), x, params={"weight": w})
    assert report["x"].ok and not report["weight"].ok


def _scale_forward(x, weight):
    return x * weight, (x, weight)


def test_a_backward_that_scales_dy_in_place_cannot_pass(rng):
    """It used to return twice the gradient and pass: the check reused the dy it had handed over."""
    def doubling_backward(dy, cache):
        x, weight = cache
        dy *= 2.0                                  # the bug: writes into the caller's dy
        return {"x": dy * weight / 2.0, "weight": (dy * x).sum(0)}

    x, w = rng.standard_normal((4, 3)), rng.standard_normal(3)
    report = sn.gradcheck((_scale_forward, doubling_backward), x, params={"weight": w})
    assert report.dy_modified and not report.ok
    assert report["x"].ok and not report["weight"].ok
    assert "wrote into its dy" in str(report)


def test_the_aliasing_slip_is_blamed_on_the_right_gradient(rng):
    """g = dy; g *= w leaves dx right and dweight wrong: the report must say weight, not x."""
    def aliasing_backward(dy, cache):
        x, weight = cache
        g = dy
        g *= weight                                # dy now holds dy * weight
        return {"x": g, "weight": (dy * x).sum(0)}

    x, w = rng.standard_normal((4, 3)), rng.standard_normal(3) + 2.0
    report = sn.gradcheck((_scale_forward, aliasing_backward), x, params={"weight": w})
    assert report["x"].ok and not report["weight"].ok and report.dy_modified


def test_a_backward_that_leaves_dy_alone_is_not_flagged(rng):
    def backward(dy, cache):
        x, weight = cache
        return {"x": dy * weight, "weight": (dy * x).sum(0)}

    report = sn.gradcheck((_scale_forward, backward), rng.standard_normal((4, 3)),
                          params={"weight": rng.standard_normal(3)})
    assert report.ok and not report.dy_modified and "dy" not in str(report)


def test_user_pair_may_return_a_tuple(rng):
    def forward(x, weight):
        return x * weight, (x, weight)

    def backward(dy, cache):
        x, weight = cache
        return dy * weight, (dy * x).sum(0)

    report = sn.gradcheck((forward, backward), rng.standard_normal((4, 3)), params={"weight": rng.standard_normal(3)})
    assert report.ok
    assert [c.name for c in report.checks] == ["x", "weight"]
    assert report["x"].worst_index != () and report["x"].n == 12
    assert "max rel err" in str(report)


def test_upstream_gradient_is_not_the_input_stream():
    """x drawn from default_rng(0) must not equal dy (with dy = x, RMSNorm's dx is 0 and
    every check would pass vacuously)."""
    x = np.random.default_rng(0).standard_normal((4, 8))
    bad = sn.gradcheck((sn.rms_norm_forward, lambda dy, c: {"x": np.zeros_like(dy)}), x, seed=0)
    assert not bad.ok


def test_gradcheck_requires_float64(rng):
    with pytest.raises(TypeError, match="float64"):
        sn.gradcheck(sn.RMSNorm(3, backend="numpy"), rng.standard_normal((2, 3)).astype(np.float32))
    with pytest.raises(TypeError, match="float64"):
        sn.gradcheck(sn.RMSNorm(3, dtype=np.float32, backend="numpy"), rng.standard_normal((2, 3)))


def test_gradcheck_leaves_the_layer_as_it_found_it(rng):
    layer = sn.RMSNormWithBias(5, backend="numpy")
    layer.params["weight"] = rng.standard_normal(5)
    before = {k: v.copy() for k, v in layer.params.items()}
    sn.gradcheck(layer, rng.standard_normal((3, 5)))
    for k in before:
        np.testing.assert_array_equal(layer.params[k], before[k])


def test_cli_passes_and_prints_a_table():
    out = subprocess.run([sys.executable, "-m", "scratchnorm.gradcheck", "--backend", "numpy"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 failed" in out.stdout and "LayerNorm(8)" in out.stdout


def test_cli_exits_non_zero_on_a_failure(monkeypatch, capsys):
    import importlib

    # the attribute scratchnorm.gradcheck is the function, so the module is imported by name
    cli = importlib.import_module("scratchnorm.gradcheck.__main__")
    from scratchnorm.gradcheck.cases import Case

    class Broken(sn.RMSNorm):
        def _backward(self, dy, cache):
            grads = super()._backward(dy, cache)
            grads["x"] = grads["x"] * 1.01
            return grads

    monkeypatch.setattr(cli, "all_cases", lambda: [Case("broken", lambda b: Broken(4, backend=b), (2, 4))])
    assert cli.main(["--backend", "numpy"]) == 1
    assert "FAILED: broken" in capsys.readouterr().out
