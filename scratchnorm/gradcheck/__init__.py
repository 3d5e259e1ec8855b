r"""Finite-difference gradient checks, for the library's layers and for your own code.

What is compared. With a random upstream gradient dy (fixed by ``seed``),
the scalar loss is L = sum(dy * y). The analytic gradients come from the
backward pass with that dy; the numeric ones from central differences,

    dL/dt_i ~ (L(t_i + h) - L(t_i - h)) / (2 h),

for every element of every tensor t: the input and each parameter. A random
dy matters: with L = sum(y) a normalization's gradient is zero (LayerNorm)
or degenerate, and a wrong backward passes unnoticed.

The error of one element (the report's "max rel err" is its maximum):

    err_i = |a_i - n_i| / max(|a_i|, |n_i|, floor),  floor = 1e-3 * max_j max(|a_j|, |n_j|) + 1e-30

a relative error, except that elements far smaller than the tensor's largest
one are measured against a thousandth of that largest one, so that exact
zeros (which the orthogonality of these gradients produces) do not divide
round-off by zero. An element fails when err_i > tol (default 1e-5).

Why 1e-5. A central difference errs two ways. Truncation, about h^2 |L'''|/6,
is negligible at h = 1e-6 for these smooth functions (at a zero row the
function bends on the scale sqrt(eps), so the zero-row cases use eps >= 1e-6).
Round-off is about eps_mach * |L| / h: each of L(t + h) and L(t - h) is a
sum over every output element, rounded, and the difference divides that
rounding by 2h. With eps_mach = 2.2e-16, h = 1e-6 and |L| of 10 to 100 (a
few hundred elements) that is 1e-9 to 1e-8 absolute, up to 1e-5 against the
floor (a thousandth of the largest gradient); the roundings are random, so
in practice the error stays well below that. tol = 1e-5 is a bound a
correct backward stays under with margin (tests/gradcheck asserts a factor
5 on every library case), while a wrong backward, a dropped term or a
factor 2, errs by 1e-2 or more. For much larger inputs |L| grows: raise h
(with ``order=4`` truncation falls as h^4).

The resolution. A fixed tol is set for whole models; on one layer float64
central differences resolve far smaller errors (a LayerNorm backward that
drops eps = 1e-5 is off by about 5e-6, inside tol). So the check also
estimates, per tensor, how far its own finite differences can be trusted:
it computes every difference at the step h and again at 2h, and takes

    resolution = max( max_i |n_i(h) - n_i(2h)|,  eps_mach * sum|dy * y| / h )

the first part measured (the truncation error of n(2h) is 4 times that of
n(h), so their gap is 3 times the truncation of n(h), plus both round-offs),
the second a floor for the round-off of L (so that a tensor of one element,
whose measured gap may happen to be tiny, is not judged on it alone). An
element also fails when |a_i - n_i| > MARGIN * resolution (MARGIN = 10):
a gradient wrong by more than ten times what the check can resolve. The
report gives the resolution per tensor, relative to its largest gradient
(absolute for a gradient that is exactly 0, as LayerNorm(1)'s dx), and the
worst error in units of it ("err/res"). The check costs twice the forward
passes of one step.

Three lines to check your own backward::

    def my_forward(x, weight): ...; return y, cache
    def my_backward(dy, cache): ...; return {"x": dx, "weight": dweight}   # or (dx, dweight)
    print(scratchnorm.gradcheck((my_forward, my_backward), x, params={"weight": w}))

Everything runs in float64: the input, the parameters and the upstream
gradient must be float64 (a float32 finite difference measures round-off).

The backward gets its own copy of dy, so a backward that writes into dy
(``g = dy; g *= w`` instead of ``g = dy * w``) cannot change the loss the
finite differences measure. Writing into dy is a bug all the same (the caller
may still need dy): the report then fails and says so.
Layer state in ``layer.buffers`` (BatchNorm's running statistics) is saved
before the check and restored after every forward, so the check leaves the
layer as it found it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._checks import fail


@dataclass
class TensorCheck:
    """The result for one tensor (the input or one parameter)."""

    name: str
    shape: tuple
    max_rel_err: float
    worst_index: tuple
    n_bad: int
    n: int
    tol: float
    resolution: float = 0.0        # the finite differences' estimated error, over the largest gradient (if not 0)
    err_over_res: float = 0.0      # max |a_i - n_i| / resolution: above MARGIN, the tensor fails

    @property
    def ok(self) -> bool:
        return self.n_bad == 0


@dataclass
class GradcheckReport:
    """All tensors of one check. ``report.ok`` is True when every tensor passed."""

    label: str
    checks: list[TensorCheck] = field(default_factory=list)
    dy_modified: bool = False      # the backward wrote into its dy argument (a bug)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks) and not self.dy_modified

    def __bool__(self) -> bool:
        return self.ok

    @property
    def max_rel_err(self) -> float:
        return max((c.max_rel_err for c in self.checks), default=0.0)

    def __getitem__(self, name: str) -> TensorCheck:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def __str__(self) -> str:
        rows = [f"gradcheck: {self.label}",
                f"  {'tensor':<8} {'shape':<14} {'max rel err':>11} {'resolution':>10} {'err/res':>8}  "
                f"{'worst index':<14} {'bad':>9}  status"]
        for c in self.checks:
            rows.append(f"  {c.name:<8} {str(c.shape):<14} {c.max_rel_err:>11.2e} {c.resolution:>10.1e} "
                        f"{c.err_over_res:>8.2g}  {str(c.worst_index):<14} {f'{c.n_bad}/{c.n}':>9}  "
                        f"{'ok' if c.ok else 'FAIL'}")
        if self.dy_modified:
            rows.append("  FAIL: backward wrote into its dy argument. Compute a new array "
                        "(g = dy * weight), never g = dy; g *= weight: the caller's dy changes.")
        return "\n".join(rows)


MARGIN = 10.0                      # an error above MARGIN * resolution fails (see the module docstring)
EPS_MACH = float(np.finfo(np.float64).eps)


def _compare(name, analytic, numeric, tol, resolution) -> TensorCheck:
    """``resolution``: the absolute error the finite differences ``numeric`` may have."""
    a = np.asarray(analytic, dtype=np.float64).reshape(np.shape(numeric))
    n = numeric
    scale = max(np.max(np.abs(a), initial=0.0), np.max(np.abs(n), initial=0.0))
    floor = 1e-3 * scale + 1e-30
    err = np.abs(a - n) / np.maximum(np.maximum(np.abs(a), np.abs(n)), floor)
    err = np.where(np.isnan(err), np.inf, err)          # a NaN anywhere is a failure
    over = np.abs(a - n) / max(resolution, 1e-300)
    over = np.where(np.isnan(over), np.inf, over)
    worst = np.unravel_index(int(np.argmax(err)), err.shape) if err.size else ()
    return TensorCheck(name, tuple(n.shape), float(err.max(initial=0.0)), tuple(int(i) for i in worst),
                       int(np.sum((err > tol) | (over > MARGIN))), int(err.size), tol,
                       resolution / scale if scale > 0 else resolution, float(over.max(initial=0.0)))


def _difference(diffs, h, order):
    """dL/dt from diffs[k] = L(t + 2^k h) - L(t - 2^k h): central (order 2) or five-point (order 4)."""
    return diffs[0] / (2 * h) if order == 2 else (8 * diffs[0] - diffs[1]) / (12 * h)


def _require_float64(name, arr):
    arr = np.asarray(arr)
    if arr.dtype != np.float64:
        fail(TypeError, name, "a float64 array (finite differences need float64)", arr,
             f"pass {name}.astype(np.float64); for a layer, build it with dtype=np.float64.")
    return arr


class _LayerTarget:
    """Adapts a Layer to (loss, analytic gradients)."""

    def __init__(self, layer):
        self.layer = layer
        self.params = {k: _require_float64(f"params[{k!r}]", v) for k, v in layer.params.items()}
        self.saved = {k: v.copy() for k, v in layer.buffers.items()}
        self.label = repr(layer)

    def restore(self):
        for k, v in self.saved.items():
            self.layer.buffers[k][...] = v

    def output(self, x):
        y = self.layer.forward(x)
        self.restore()
        return y

    def analytic(self, x, dy):
        self.output(x)
        dx = self.layer.backward(dy)
        return {"x": dx, **self.layer.grads}


class _FunctionTarget:
    """Adapts a (forward, backward) pair of pure functions."""

    def __init__(self, pair, params, kwargs):
        self.forward, self.backward = pair
        self.params = {k: _require_float64(f"params[{k!r}]", v).copy() for k, v in (params or {}).items()}
        self.kwargs = kwargs or {}
        self.label = getattr(self.forward, "__name__", "forward")

    def restore(self):
        pass

    def output(self, x):
        return self.forward(x, **self.params, **self.kwargs)[0]

    def analytic(self, x, dy):
        _, cache = self.forward(x, **self.params, **self.kwargs)
        grads = self.backward(dy, cache)
        if not isinstance(grads, dict):
            grads = tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)
            grads = dict(zip(["x", *self.params], grads))
        return grads


def gradcheck(target, x, *, params=None, kwargs=None, seed=0, h=1e-6, tol=1e-5, check_x=True, order=2):
    """Compare analytic and central-difference gradients; returns a GradcheckReport.

    target: a Layer, or a pair ``(forward, backward)`` of pure functions with
    ``forward(x, **params, **kwargs) -> (y, cache)`` and ``backward(dy, cache)``
    returning a dict {"x": dx, name: dparam, ...} or a tuple (dx, dparam, ...) in
    the order of ``params``. x: float64 input. h: finite-difference step.
    tol: the largest allowed err_i; an element also fails when its error exceeds MARGIN times the
    resolution the finite differences reach (see the module docstring).
    order: 2 for the central difference above (error O(h^2)); 4 for the five-point
    (L(t+h) - L(t-h)) * 8/(12h) - (L(t+2h) - L(t-2h)) / (12h) (error O(h^4)), which
    allows a larger h and so less round-off: for whole models, whose loss is large
    next to the gradient of any one parameter.
    """
    if order not in (2, 4):
        fail(ValueError, "order", "2 or 4", order, "pass order=2 (central difference) or order=4 (five-point).")
    if isinstance(target, tuple) and len(target) == 2 and all(callable(f) for f in target):
        t = _FunctionTarget(target, params, kwargs)
    elif hasattr(target, "forward") and hasattr(target, "backward") and hasattr(target, "params"):
        if params is not None:
            fail(TypeError, "params", "None when checking a layer (it has its own layer.params)", params,
                 "set the layer's parameters with layer.params[name] = value instead.")
        t = _LayerTarget(target)
    else:
        fail(TypeError, "target", "a layer or a (forward, backward) pair of functions", target,
             "pass gradcheck(layer, x) or gradcheck((my_forward, my_backward), x, params={...}).")
    # check_x=False: x is not differentiated (token ids, for example) and may be any dtype
    x = (_require_float64("x", x) if check_x else np.asarray(x)).copy()
    try:
        y = t.output(x)
        # A stream of its own: with default_rng(seed), a caller who drew x from
        # default_rng(0) would get dy == x, and for RMSNorm dx = 0 exactly.
        rng = np.random.default_rng((seed, 0x5EED))
        dy = rng.standard_normal(np.shape(y))               # random upstream gradient
        dy_given = dy.copy()                                # the backward's own copy
        analytic = t.analytic(x, dy_given)
        dy_modified = not np.array_equal(dy_given, dy, equal_nan=True)

        def loss():
            return float(np.sum(dy * t.output(x)))

        roundoff = EPS_MACH * float(np.sum(np.abs(dy * y))) / h      # the floor of the resolution

        report = GradcheckReport(t.label, dy_modified=dy_modified)
        tensors = ({"x": x} if check_x else {}) | t.params
        for name, arr in tensors.items():
            if name not in analytic:
                fail(KeyError, "backward's result", f"a gradient named {name!r}", sorted(analytic),
                     f"return dL/d{name} from backward.")
            numeric, coarse = np.zeros(arr.shape), np.zeros(arr.shape)       # at the steps h and 2h
            flat = arr.reshape(-1)                          # a view: perturb in place
            if not np.shares_memory(flat, arr):
                fail(ValueError, name, "a C-contiguous array", arr, f"pass np.ascontiguousarray({name}).")
            for i in range(flat.size):
                old = flat[i]
                diffs = []
                for step in (h, 2 * h, 4 * h)[: order // 2 + 1]:      # L(t + step) - L(t - step)
                    flat[i] = old + step
                    lp = loss()
                    flat[i] = old - step
                    diffs.append(lp - loss())
                flat[i] = old
                numeric.flat[i], coarse.flat[i] = [_difference(diffs[j:], h * 2 ** j, order) for j in (0, 1)]
            resolution = max(float(np.max(np.abs(numeric - coarse), initial=0.0)), roundoff)
            report.checks.append(_compare(name, analytic[name], numeric, tol, resolution))
    finally:
        t.restore()
    return report
