r"""The torch bridge: a scratchnorm layer, or a learner's exercise file, inside a PyTorch model.

It needs the compare extra (torch; transformers for the example): torch is imported here and nowhere else
in the package, so the core never needs it. Whatever is bridged keeps its own maths: torch calls its
forward, hands the NumPy backward the upstream gradient, and passes on what it returns. Autograd
differentiates nothing of it.

    from scratchnorm.torch_bridge import ExerciseNorm, LayerModule, replace_modules

    norm = ExerciseNorm("ex/rmsnorm.py", 64, eps=1e-5)     # the learner's forward and backward
    norm = LayerModule(scratchnorm.RMSNorm(64, eps=1e-5))  # any one-input layer of the library

``numpy_function(forward, backward)`` is the one piece under both: a ``torch.autograd.Function`` from two
NumPy callables,

    forward(*arrays, *constants) -> (y, saved)        arrays: the tensors, as NumPy arrays
    backward(dy, saved) -> (d array, ...)             one gradient per array, in their order

Every returned gradient is checked: its shape must be its tensor's (a wrong shape is an error naming the
gradient and the fix). y gets x's dtype and each gradient its tensor's, as torch requires (a float64
gradient of a float32 tensor comes back float32); nothing else is converted. Tensors reach NumPy as float32
or float64 (NumPy has no torch.bfloat16: an error says to run the module in float32).
``scratchnorm.torch_bridge.llama`` is the worked example: a tiny Hugging Face Llama whose RMSNorms are
the learner's.

A learner's file is read in the contract the exercise checker reads it in (``learner_contract``:
scratchnorm.exercises' load and contract_for), and ``learner_norm(contract, norm)`` builds the
module that takes the place of a torch norm, with its weights, eps and running averages:

* scratchnorm's contract (the stubs of ``python -m scratchnorm.exercises new``): ``ExerciseNorm``;
* the cache contract, as CS231n's learners write it: ``CacheNorm``. It accepts

      layernorm_forward(x, gamma, beta, ln_param) -> (out, cache)            for a torch.nn.LayerNorm
      spatial_batchnorm_forward(x, gamma, beta, bn_param) -> (out, cache)    for a torch.nn.BatchNorm2d
      batchnorm_forward(x, gamma, beta, bn_param) -> (out, cache)            for a torch.nn.BatchNorm1d
      spatial_groupnorm_forward(x, gamma, beta, G, gn_param) -> (out, cache) for a torch.nn.GroupNorm
      *_backward(dout, cache) -> (dx, dgamma, dbeta)                        dgamma, dbeta: gamma's shape

  with the shapes the course gives them: LayerNorm's x (N, D) (the model's leading axes are flattened into
  N and restored), BatchNorm's (N, D) or (N, C, H, W), gamma (D,) or (C,), GroupNorm's gamma (1, C, 1, 1).
  The parameter dict is the bridge's, new at each call: {"mode", "eps"} as the checker passes it, and for
  BatchNorm "momentum" and the module's "running_mean" and "running_var" (copies), which the learner's
  forward replaces or updates in place. mode is "train" when the module is training, else "test" (then the
  forward must use the running averages, and nothing may ask for a gradient: CS231n's backward is the
  training forward's). Two conventions differ from torch's and are translated, so that the module's buffers
  keep BatchNorm2d's meaning (its state_dict is torch's): CS231n's momentum weighs the old average, torch's
  the batch (the learner gets 1 - norm.momentum); CS231n's running variance averages the batch's biased
  variance, torch's the unbiased one (the batch's share of the learner's update is rescaled by n/(n - 1),
  ``torch_running_var``).
"""
from __future__ import annotations

import copy
import runpy
from pathlib import Path

import numpy as np
import torch

from .._checks import fail
from ..exercises import (CACHE_FUNCTIONS, EXERCISES, Cache, UsageError, cache_backward, cache_forward, check,
                         contract_for, learner_backward, learner_forward, library_solution, load)
from ..layer import Layer
from ..rmsnorm import rms_norm_forward

__all__ = ["CacheNorm", "ExerciseNorm", "LayerModule", "checker_report", "exercise_functions", "learner_contract",
           "learner_norm", "numpy_function", "replace_modules", "torch_running_var"]


def _array(t: torch.Tensor) -> np.ndarray:
    """A tensor's values as a NumPy array of its dtype (a copy: the learner may write into it)."""
    if t.dtype not in (torch.float32, torch.float64):
        fail(TypeError, "tensor", "a float32 or float64 tensor (NumPy's dtypes)", str(t.dtype),
             "run the bridged module in float32 or float64: model.float().")
    return t.detach().cpu().numpy().copy()


def _tensor(a, like: tuple, what: str, fix: str) -> torch.Tensor:
    """The NumPy array ``a`` (y, or a gradient) as a tensor of ``like`` = (shape, dtype, device)."""
    shape, dtype, device = like
    if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype.kind != "f":
        fail(ValueError, what, f"a float array of shape {shape}", a, fix)
    return torch.from_numpy(np.ascontiguousarray(a)).to(dtype=dtype, device=device)


def _like(t: torch.Tensor) -> tuple:
    return tuple(t.shape), t.dtype, t.device


def numpy_function(forward, backward, names=("x",), name="NumpyFunction"):
    """A torch.autograd.Function whose forward and backward are the NumPy callables (module docstring).

    ``names``: what each tensor is, for the error messages ("x", "weight", ...). ``apply(*tensors,
    *constants)``: the constants (eps, ...) are passed to ``forward`` after the arrays and get no gradient."""
    n = len(names)

    def fwd(ctx, *args):
        tensors, constants = args[:n], args[n:]
        y, saved = forward(*(_array(t) for t in tensors), *constants)
        ctx.saved, ctx.like = saved, [_like(t) for t in tensors]
        return _tensor(y, ctx.like[0], "y", "return y, the normalized x, of x's shape (the forward's output).")

    def bwd(ctx, dy):
        grads = backward(_array(dy), ctx.saved)
        if len(grads) != n:
            fail(ValueError, "backward", f"{n} gradients ({', '.join(names)})", len(grads),
                 "return one gradient per input of the forward.")
        out = [_tensor(g, like, f"d{what}", "return one gradient per input, each of its input's shape (sum a "
                       "parameter's over the batch axes).") for g, like, what in zip(grads, ctx.like, names)]
        return (*out, *([None] * (len(ctx.needs_input_grad) - n)))   # the constants: no gradient

    return type(name, (torch.autograd.Function,), {"forward": staticmethod(fwd), "backward": staticmethod(bwd)})


def exercise_functions(source, exercise: str | None = None) -> tuple[str, dict, tuple]:
    """(exercise name, {"forward", "backward"}, the names of the learner's own functions) from ``source``: a
    path to the learner's file (``python -m scratchnorm.exercises new NAME`` wrote it), a module, or a
    dict. A function the file does not define (pRMSNorm's forward) is the library's, and is said so."""
    if isinstance(source, (str, Path)):
        everything = runpy.run_path(str(source))
    else:
        everything = source if isinstance(source, dict) else vars(source)
    name = exercise or everything.get("EXERCISE")
    if name not in EXERCISES:
        fail(ValueError, "exercise", f"one of {', '.join(map(repr, EXERCISES))} (or the file's EXERCISE)", name,
             "keep the stub's line EXERCISE = \"...\", or pass exercise=.")
    own = tuple(k for k in ("forward", "backward") if callable(everything.get(k)))
    if "backward" not in own:
        fail(ValueError, "source", "a file that defines backward (the exercise's stub)", sorted(everything),
             f"write backward as the stub of `python -m scratchnorm.exercises new {name}` asks.")
    library = {"forward": _prms_norm_forward} if name == "prmsnorm" else {}     # the one stub without a forward
    return name, {**library, **library_solution(name), **{k: everything[k] for k in own}}, own


def _prms_norm_forward(x, weight, eps, k):
    """pRMSNorm's forward, the library's (its exercise asks for the backward only)."""
    return rms_norm_forward(x, weight, eps=eps, k=k)[0]


class ExerciseNorm(torch.nn.Module):
    """A normalization whose forward and backward are the learner's exercise functions.

    ExerciseNorm(source, num_features, eps=1e-5, exercise=None, dtype=torch.float32, **constants):
    ``source`` as exercise_functions takes it; weight (ones) and, where the exercise has one, bias (zeros)
    of shape (num_features,); ``constants``: the exercise's other arguments (k for pRMSNorm, num_groups for
    GroupNorm). The learner's backward gets (dy, x, weight, *constants) as the stub says, and returns the dict
    of gradients; torch receives its "x", "weight" (and "bias")."""

    def __init__(self, source, num_features: int, eps: float = 1e-5, exercise: str | None = None,
                 dtype=torch.float32, **constants):
        super().__init__()
        self.exercise, functions, self.own = exercise_functions(source, exercise)
        ex = EXERCISES[self.exercise]
        self.functions, self.names = functions, ex.grads                       # ("x", "weight"[, "bias"])
        extra = list(ex.functions["backward"][3:])                              # the stub's: eps, k, num_groups
        given = {"eps": eps, **constants}
        unknown = sorted(set(given) - set(extra))
        if unknown:
            fail(TypeError, unknown[0], f"only the {self.exercise} stub's arguments {extra}", given[unknown[0]],
                 f"leave {unknown[0]} out (the {self.exercise} exercise does not take it).")
        missing = [p for p in extra if p not in given]
        if missing:
            fail(TypeError, missing[0], f"a value for each of {extra} (the {self.exercise} stub's arguments)",
                 "nothing", f"pass {missing[0]}=... to ExerciseNorm.")
        self.constants = tuple(given[p] for p in extra)
        self.weight = torch.nn.Parameter(torch.ones(num_features, dtype=dtype))
        if "bias" in self.names:
            self.bias = torch.nn.Parameter(torch.zeros(num_features, dtype=dtype))
        self._function = numpy_function(self._forward, self._backward, self.names, f"{self.exercise}_exercise")

    def _forward(self, x, weight, *rest):
        """The learner's forward on copies of x and weight (it may write into them), and what its backward
        is given (exercises/bridge_calls.py: the NumPy side, tested without torch)."""
        return learner_forward(self.functions["forward"], self.names, x, weight, rest)

    def _backward(self, dy, saved):
        return learner_backward(self.functions["backward"], self.names, dy, saved)

    def forward(self, x):
        params = (self.weight, self.bias) if "bias" in self.names else (self.weight,)
        return self._function.apply(x, *params, *self.constants)

    def extra_repr(self):
        mine = " and ".join(self.own)
        return f"{self.exercise!r}, {self.weight.shape[0]}, constants={self.constants}, the learner's {mine}"


# a torch norm -> the cache contract's pair that takes its place
PAIRS = {"LayerNorm": "layernorm", "BatchNorm2d": "spatial_batchnorm", "BatchNorm1d": "batchnorm",
         "GroupNorm": "groupnorm"}


def learner_contract(source, exercise: str | None = None):
    """The contract of the learner's functions, read as the exercise checker reads it: ``source`` a path (its
    exercise from ``exercise``, else its EXERCISE, else the one exercise whose cache functions it defines,
    as ``check FILE``), a module or a dict (``exercise`` or its EXERCISE). ``exercise`` may name a pair of the
    cache contract (spatial_batchnorm). Returns contract.Cache or contract.Library; ``.functions`` holds the
    learner's, ``check(contract.ex.name, source, pair=...)`` names their mistake."""
    if isinstance(source, (str, Path)):
        try:
            module, name, pair = load(Path(source), exercise)
        except UsageError as e:
            raise ValueError(str(e)) from None
        everything = vars(module)
    else:
        everything = source if isinstance(source, dict) else vars(source)
        pair = exercise if exercise in CACHE_FUNCTIONS else None
        name = CACHE_FUNCTIONS[pair].exercise if pair else exercise or everything.get("EXERCISE")
        if name not in EXERCISES:
            fail(ValueError, "exercise", f"one of {', '.join(dict.fromkeys([*EXERCISES, *CACHE_FUNCTIONS]))}",
                 name, "pass exercise= (an exercise, or a pair of the cache contract such as spatial_batchnorm).")
    return contract_for(EXERCISES[name], everything, pair)


def pair_of(contract) -> str:
    """The cache contract's pair (layernorm, spatial_batchnorm, ...) whose function names ``contract`` read."""
    return next(p for p, c in CACHE_FUNCTIONS.items() if c == contract.names)


def checker_report(contract, source=""):
    """The exercise checker's report (scratchnorm.exercises.check) on the learner's functions of ``contract``,
    in that contract: ``.diagnoses`` holds the catalogue's code of their mistake."""
    if isinstance(contract, Cache):
        pair = pair_of(contract)
        functions = {getattr(contract.names, role): fn for role, fn in contract.functions.items()}
        return check(contract.ex.name, functions, source=str(source), pair=pair)
    return check(contract.ex.name, contract.functions, source=str(source))


def learner_norm(contract, norm: torch.nn.Module) -> torch.nn.Module:
    """The learner's module that takes the place of ``norm`` (a torch.nn LayerNorm, BatchNorm2d, BatchNorm1d
    or GroupNorm), with its weight, bias, eps, momentum and running averages, its dtype and its mode:
    a CacheNorm for the cache contract, an ExerciseNorm for scratchnorm's."""
    kind = type(norm).__name__
    if kind not in PAIRS:
        fail(TypeError, "norm", f"a torch.nn {', '.join(PAIRS)}", kind, "replace only the model's torch norms.")
    if norm.weight is None or (kind.startswith("BatchNorm") and not norm.track_running_stats):
        fail(ValueError, "norm", "a norm with a weight and a bias (and, BatchNorm, running averages), as the "
             "cache contract's", norm, "replace the norms built with their defaults.")
    if kind.startswith("BatchNorm") and not isinstance(contract, Cache):
        fail(ValueError, "contract", "the cache contract for a BatchNorm (scratchnorm's batchnorm exercise keeps "
             "no running averages, which BatchNorm's test mode uses)", "scratchnorm's", "write "
             f"{CACHE_FUNCTIONS[PAIRS[kind]].forward} and {CACHE_FUNCTIONS[PAIRS[kind]].backward}, as CS231n's.")
    C = norm.num_channels if kind == "GroupNorm" else norm.weight.shape[0]
    constants = {"num_groups": norm.num_groups} if kind == "GroupNorm" else {}
    if isinstance(contract, Cache):
        mine = CacheNorm(contract, C, eps=norm.eps, momentum=getattr(norm, "momentum", 0.1),
                         dtype=norm.weight.dtype, pair=PAIRS[kind], **constants)
    else:
        mine = ExerciseNorm(contract.functions, C, eps=norm.eps, exercise=contract.ex.name, dtype=norm.weight.dtype,
                            **constants)
    mine.load_state_dict(norm.state_dict())
    return mine.train(norm.training)


def torch_running_var(learners: np.ndarray, before: np.ndarray, momentum: float, n: int) -> np.ndarray:
    """The running variance in torch's convention from the learner's update in CS231n's.

    CS231n:  r' = m r + (1 - m) var_b            var_b = mean((x - mu)^2), biased; m = bn_param's momentum
    torch:   r' = m r + (1 - m) var_b n/(n - 1)  the unbiased batch variance (n values per channel)

    so torch's is m r + (r' - m r) n/(n - 1): the batch's share of the learner's own update, rescaled. A
    learner whose update is not CS231n's gets a running variance that is not torch's, as it should."""
    return momentum * before + (learners - momentum * before) * (n / (n - 1))


class CacheNorm(torch.nn.Module):
    """A normalization whose forward and backward are the learner's functions in the cache contract (the
    module docstring says which, and how they are called).

    CacheNorm(contract, num_features, eps=1e-5, momentum=0.1, dtype=torch.float32, pair=None, num_groups=None):
    ``contract``: a contract.Cache (learner_contract); ``pair``: which of its exercise's pairs to call
    (default: the contract's; BatchNorm has two); ``momentum``: torch's (the learner's bn_param gets
    1 - momentum). weight (ones) and bias (zeros) of shape (num_features,); BatchNorm's buffers
    running_mean, running_var and num_batches_tracked as torch.nn.BatchNorm2d's."""

    def __init__(self, contract, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 dtype=torch.float32, pair: str | None = None, num_groups: int | None = None):
        super().__init__()
        if not isinstance(contract, Cache):
            fail(TypeError, "contract", "the cache contract's (learner_contract of a file defining "
                 "layernorm_forward and layernorm_backward, ...)", type(contract).__name__,
                 "use ExerciseNorm for scratchnorm's contract, or learner_norm, which picks.")
        pair = pair or pair_of(contract)
        self.names = CACHE_FUNCTIONS[pair]
        if self.names.exercise != contract.ex.name:
            fail(ValueError, "pair", f"a pair of the {contract.ex.name} exercise", pair,
                 f"replace a torch norm of the {contract.ex.name} kind, or check another file.")
        self.functions = {role: contract.functions.get(role) for role in ("forward", "backward")}
        missing = [getattr(self.names, role) for role, fn in self.functions.items() if not callable(fn)]
        if missing:
            fail(ValueError, "contract", f"both {self.names.forward} and {self.names.backward} (the backward "
                 "needs the forward's cache)", f"no {missing[0]}", f"define {missing[0]} in the file.")
        self.eps, self.momentum, self.num_groups = eps, momentum, num_groups
        if self.names.exercise == "groupnorm" and num_groups is None:
            fail(TypeError, "num_groups", "the number of groups G (GroupNorm)", None, "pass num_groups=G.")
        self.weight = torch.nn.Parameter(torch.ones(num_features, dtype=dtype))
        self.bias = torch.nn.Parameter(torch.zeros(num_features, dtype=dtype))
        self.running = self.names.exercise == "batchnorm"
        if self.running and not (isinstance(momentum, float) and 0 < momentum <= 1):
            fail(ValueError, "momentum", "torch's momentum, a float in (0, 1] (CS231n's is 1 - momentum)", momentum,
                 "build the BatchNorm with momentum=0.1 (torch's default); None, a cumulative average, has no "
                 "CS231n counterpart.")
        if self.running:
            self.register_buffer("running_mean", torch.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", torch.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long))
        self._function = numpy_function(self._forward, self._backward, ("x", "weight", "bias"), self.names.forward)

    @property
    def gamma_shape(self) -> tuple:
        C = self.weight.shape[0]
        return (1, C, 1, 1) if self.names.exercise == "groupnorm" else (C,)

    def _rows(self, shape: tuple) -> tuple:
        """x's shape as the learner's function takes it: LayerNorm's leading axes flattened into N."""
        return (-1, shape[-1]) if self.names.exercise == "layernorm" else shape

    def _forward(self, x, weight, bias, mode):
        """(out, (mode, cache)): the learner's forward on x (a copy: _array), with the bridge's parameter dict,
        whose running averages then become the module's buffers (torch's convention: module docstring)."""
        rows = x.reshape(self._rows(x.shape))
        param = {"mode": mode, "eps": self.eps}
        if self.running:
            before = {k: _array(getattr(self, k)) for k in ("running_mean", "running_var")}
            param.update(momentum=1 - self.momentum, **{k: v.copy() for k, v in before.items()})
        extra = (self.num_groups,) if self.names.exercise == "groupnorm" else ()
        out, cache = cache_forward(self.functions["forward"], rows, weight.reshape(self.gamma_shape),
                                   bias.reshape(self.gamma_shape), param, extra)
        if self.running and mode == "train":
            self._keep_running(param, before, n=rows.size // rows.shape[1])
        return out.reshape(x.shape), (mode, cache)

    def _keep_running(self, param: dict, before: dict, n: int):
        m, C = 1 - self.momentum, self.weight.shape[0]
        for k in ("running_mean", "running_var"):
            value = np.asarray(param.get(k))
            if value.shape != (C,):
                fail(ValueError, f"bn_param[{k!r}]", f"an array of shape ({C},) after {self.names.forward}",
                     value, f"store the new average: bn_param[{k!r}] = {k}.")
        new = {"running_mean": np.asarray(param["running_mean"]),
               "running_var": torch_running_var(np.asarray(param["running_var"]), before["running_var"], m, n)}
        with torch.no_grad():
            for k, value in new.items():
                getattr(self, k).copy_(torch.from_numpy(value.astype(before[k].dtype)))
            self.num_batches_tracked += 1

    def _backward(self, dy, saved):
        mode, cache = saved
        if mode != "train":
            fail(RuntimeError, "mode", "'train' for a gradient (CS231n's backward differentiates the training "
                 "forward)", mode, "call model.train() before backward, or evaluate under torch.no_grad().")
        dx, dweight, dbias = cache_backward(self.functions["backward"], dy.reshape(self._rows(dy.shape)), cache,
                                            self.gamma_shape)
        return dx.reshape(dy.shape), dweight.reshape(-1), dbias.reshape(-1)

    def forward(self, x):
        ndim = len(self.names.shapes[0])                                    # the course's: (N, D), (N, C, H, W)
        if (x.ndim != ndim and self.names.exercise != "layernorm") or x.shape[self._axis()] != self.weight.shape[0]:
            fail(ValueError, "x", f"a tensor of {ndim} axes with {self.weight.shape[0]} on axis "
                 f"{self._axis()} ({self.names.forward}'s)", tuple(x.shape), "replace a norm of that kind.")
        return self._function.apply(x, self.weight, self.bias, "train" if self.training else "test")

    def _axis(self) -> int:
        return -1 if self.names.exercise == "layernorm" else 1

    def extra_repr(self):
        return f"{self.names.forward}/{self.names.backward}, {self.weight.shape[0]}, eps={self.eps}" + (
            f", momentum={self.momentum}" if self.running else "")


class LayerModule(torch.nn.Module):
    """A one-input scratchnorm layer (RMSNorm, LayerNorm, BatchNorm, ...) as a torch module: its parameters
    become torch Parameters (their dtype: build the layer with dtype=np.float32 for a float32 model), and
    every call runs layer.forward and, later, layer.backward on a shallow copy of the layer that keeps that
    call's cache (a module may be called several times before one backward)."""

    def __init__(self, layer: Layer):
        super().__init__()
        if not isinstance(layer, Layer):
            fail(TypeError, "layer", "a scratchnorm layer (scratchnorm.RMSNorm(...), ...)", type(layer).__name__,
                 "pass a layer object of the library.")
        self.layer, self.param_names = layer, tuple(layer.params)
        for name, value in layer.params.items():
            self.register_parameter(name, torch.nn.Parameter(torch.from_numpy(value.copy())))
        self._function = numpy_function(self._forward, self._backward, ("x", *self.param_names),
                                        type(layer).__name__)

    def _forward(self, x, *params):
        call = copy.copy(self.layer)                 # the same params dict and buffers; its own cache
        call.params.update(dict(zip(self.param_names, params)))
        return call.forward(x), call

    @staticmethod
    def _backward(dy, call):
        dx = call.backward(dy)
        return (dx, *(call.grads[name] for name in call.params))

    def forward(self, x):
        return self._function.apply(x, *(getattr(self, name) for name in self.param_names))

    def extra_repr(self):
        return repr(self.layer)


def replace_modules(model: torch.nn.Module, matches, make) -> list[str]:
    """Replace, in place, every submodule for which ``matches(module)`` is true by ``make(module)``; returns
    the names replaced. E.g. every Hugging Face RMSNorm by the learner's:
    ``replace_modules(model, lambda m: type(m).__name__.endswith("RMSNorm"), lambda m: ExerciseNorm(...))``."""
    replaced = []
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if matches(child):
                setattr(parent, child_name, make(child))
                replaced.append(f"{parent_name}.{child_name}" if parent_name else child_name)
    return replaced
