"""The library's own answer to each exercise, in the exercise's contract (catalogue.EXERCISES[name].functions).

``library_solution("layernorm")`` is ``{"forward": f, "backward": g}`` with the stub's parameters, built on
the library's functions: what a passing report looks like (the lessons' exercise cells check it until the
learner has written their own), and a known-good answer to compare one's own with.
"""
from __future__ import annotations

import numpy as np

from .. import (batch_norm_backward, batch_norm_forward, group_norm_backward, group_norm_forward,
                layer_norm_backward, layer_norm_forward, rms_norm_backward, rms_norm_forward)
from .._checks import fail
from .catalogue import EXERCISES

# name -> (forward(x, weight, bias, *the stub's other parameters) -> (y, cache), backward(dy, cache))
_LIBRARY = {
    "layernorm": (lambda x, w, b, eps: layer_norm_forward(x, w, b, eps=eps), layer_norm_backward),
    "rmsnorm": (lambda x, w, b, eps: rms_norm_forward(x, w, b, eps=eps), rms_norm_backward),
    "batchnorm": (lambda x, w, b, eps: batch_norm_forward(x, w, b, eps=eps), batch_norm_backward),
    "prmsnorm": (lambda x, w, b, eps, k: rms_norm_forward(x, w, b, eps=eps, k=k), rms_norm_backward),
    "groupnorm": (lambda x, w, b, num_groups, eps: group_norm_forward(x, w, b, num_groups=num_groups, eps=eps),
                  group_norm_backward),
}


def library_solution(name: str) -> dict:
    """{"forward": ..., "backward": ...}, those the exercise asks for, computed by the library."""
    if name not in EXERCISES:
        fail(ValueError, "name", f"one of {', '.join(map(repr, EXERCISES))}", name,
             "run `python -m scratchnorm.exercises list` to see the exercises.")
    library_forward, library_backward = _LIBRARY[name]
    grads, has_bias = EXERCISES[name].grads, "bias" in EXERCISES[name].grads

    def forward(x, weight, *rest):                    # the stub's forward: y
        bias, rest = (rest[0], rest[1:]) if has_bias else (None, rest)
        return library_forward(x, weight, bias, *rest)[0]

    def backward(dy, x, weight, *rest):               # the stub's backward: from the forward's inputs
        bias = np.zeros_like(weight) if has_bias else None
        return {k: v for k, v in library_backward(dy, library_forward(x, weight, bias, *rest)[1]).items()
                if k in grads}

    return {k: {"forward": forward, "backward": backward}[k] for k in EXERCISES[name].functions}
