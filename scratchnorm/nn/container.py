"""Container: a layer made of named child layers, with their parameters under prefixed names.

    block = Sequential(Linear(4, 8), ReLU(), Linear(8, 2))
    block.params["0.weight"]      # the first Linear's weight: "<child name>.<its name>"
    block.params["2.bias"] = b    # routed to the child, with the child's checks
    block.grads["0.weight"]       # after block.backward(dy)

The names nest: a Transformer's first attention weight is
"blocks.0.attn.f.qkv.weight". An optimizer walks ``params`` and ``grads``
under these names and never needs to know how the model is built.

``params``, ``buffers`` and ``grads`` are live views of the children's dicts, not
copies: the arrays they hand out are the children's own arrays, so an
in-place update ``params[name] -= lr * grads[name]`` changes the model, and
a value assigned to a child directly is seen through the view.

A container follows the layer contract (layer.py): ``forward(x)`` runs the
children's forwards (each child keeps its own cache), ``backward(dy)`` runs
their backwards in reverse order and collects their gradients under the
prefixed names (``grads``, the view, reads each child's own after its
backward: nothing is copied up the tree). ``train()`` / ``eval()`` reach every child. A layer object
may appear once in a container: its cache holds one forward at a time.
"""
from __future__ import annotations

from collections.abc import ItemsView, MutableMapping

import numpy as np

from .._checks import fail
from ..layer import Layer


def check_layer(arg: str, layer) -> Layer:
    if not isinstance(layer, Layer):
        fail(TypeError, arg, "a scratchnorm Layer", layer,
             "pass a layer such as Linear(4, 8) or ReLU(); wrap other code in a Layer subclass.")
    return layer


class PrefixedView(MutableMapping):
    """The ``params`` (or ``buffers``) of a container's children, as one dict with prefixed names."""

    def __init__(self, owner: "Container", attr: str):
        self._owner, self._attr = owner, attr

    def _split(self, name: str):
        child, _, rest = str(name).partition(".")
        children = self._owner.children
        if child not in children or rest not in getattr(children[child], self._attr):
            where = f"{type(self._owner).__name__}.{self._attr}[{name!r}]"
            fail(KeyError, where, f"one of {list(self)}", name,
                 f"use a name printed by list(model.{self._attr}); names are fixed at construction.")
        return getattr(children[child], self._attr), rest

    def __getitem__(self, name):
        inner, rest = self._split(name)
        return inner[rest]

    def __setitem__(self, name, value):
        inner, rest = self._split(name)
        inner[rest] = value          # the child's ParamDict checks shape and dtype

    def __delitem__(self, name):
        fail(TypeError, f"del {type(self._owner).__name__}.{self._attr}[{name!r}]", "no deletion", name,
             "parameters are fixed at construction; build the model without the layer instead.")

    def __iter__(self):
        for child_name, child in self._owner.children.items():
            for name in getattr(child, self._attr):
                yield f"{child_name}.{name}"

    # Speed only: the two methods below give what MutableMapping's defaults give. The defaults
    # look every name up from the top (``_split`` at every level, and ``in`` on a nested view
    # is itself a lookup), which made an optimizer's walk over a Transformer's parameters cost
    # more than the layers' arithmetic at small sizes.
    def __contains__(self, name):
        child, _, rest = str(name).partition(".")
        layer = self._owner.children.get(child)
        return layer is not None and rest in getattr(layer, self._attr)

    def items(self):
        return _PrefixedItems(self)

    def __len__(self):
        return sum(len(getattr(child, self._attr)) for child in self._owner.children.values())

    def __repr__(self):
        return repr(dict(self))


class _PrefixedItems(ItemsView):
    """``view.items()``: (name, array) pairs in the order of ``iter(view)``, read from each child
    in one walk instead of one lookup per name."""

    def __iter__(self):
        view = self._mapping
        for child_name, child in view._owner.children.items():
            for name, value in getattr(child, view._attr).items():
                yield f"{child_name}.{name}", value


def param_owners(layer, prefix: str = ""):
    """Yield (prefixed name, owning layer, its own name) for every parameter of ``layer``, in the order
    of ``layer.params``: a container's parameters belong to its children, under "<child>.<name>"."""
    if isinstance(layer, Container):
        for child_name, child in layer.children.items():
            yield from param_owners(child, f"{prefix}{child_name}.")
    else:
        for name in layer.params:
            yield prefix + name, layer, name


class Container(Layer):
    """Base class of the layers built from other layers (Sequential, Residual, attention, Transformer).

    Subclasses add their children with ``self.add(name, layer)`` in ``__init__``
    and implement ``_forward`` / ``_backward`` by calling the children's
    ``forward`` / ``backward``; ``_backward`` returns ``self._with_child_grads(dx)``.
    A container owns no parameters itself.
    """

    def __init__(self, *, backend: str = "numba", dtype=np.float64):
        super().__init__(backend=backend, dtype=dtype)
        self.children: dict[str, Layer] = {}
        self.params = PrefixedView(self, "params")
        self.buffers = PrefixedView(self, "buffers")
        self.grads = PrefixedView(self, "grads")

    def add(self, name: str, layer: Layer) -> Layer:
        check_layer(f"{type(self).__name__} child {name!r}", layer)
        if "." in name or name in self.children:
            fail(ValueError, "name", "a new child name without '.'", name, "pick another name.")
        if any(layer is child for child in self.children.values()):
            fail(ValueError, f"{type(self).__name__} child {name!r}", "a layer not already in this container",
                 repr(layer), "build a new layer; one object keeps the cache of only one forward.")
        self.children[name] = layer
        return layer

    def train(self, mode: bool = True):
        super().train(mode)
        for child in self.children.values():
            child.train(mode)
        return self

    def _with_child_grads(self, dx) -> dict:
        """{"x": dx}, what ``_backward`` returns: the children's gradients are already in their own
        ``grads``, which ``self.grads`` shows under prefixed names."""
        return {"x": dx}

    def _keep_grads(self, grads: dict) -> None:
        """Nothing to keep: ``self.grads`` is a view of the children's."""

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, child in self.children.items():
            inner = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({name}): {inner}")
        return "\n".join(lines) + "\n)"
