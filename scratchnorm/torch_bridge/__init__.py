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
"""
from __future__ import annotations

import copy
import runpy
from pathlib import Path

import numpy as np
import torch

from .._checks import fail
from ..exercises import EXERCISES, library_solution
from ..exercises.bridge_calls import learner_backward, learner_forward
from ..layer import Layer
from ..rmsnorm import rms_norm_forward

__all__ = ["ExerciseNorm", "LayerModule", "exercise_functions", "numpy_function", "replace_modules"]


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
