"""The backend registry: explicit tables, checked when they are registered."""
from __future__ import annotations

import subprocess
import sys

import pytest

import scratchnorm as sn
from scratchnorm.nn import activations, updates
from scratchnorm.backend import OPS, REGISTRY, Registry, RegistryError


def fwd(x, weight=None, *, eps=1e-5, out=None):
    return x, {}


def bwd(dy, cache, *, dx_out=None):
    return {"x": dy}


def test_a_complete_table_registers_and_is_found():
    reg = Registry(ops=("f", "b"))
    reg.register("numpy", {"f": fwd, "b": bwd})
    assert reg.implementation("numpy", "f") is fwd


def test_a_missing_kernel_is_an_error_at_registration_naming_it():
    reg = Registry(ops=("f", "b"))
    with pytest.raises(RegistryError, match=r"no implementation for \['b'\]"):
        reg.register("numba", {"f": fwd}, complete=True)


def test_an_unknown_operation_is_an_error_at_registration():
    with pytest.raises(RegistryError, match=r"unknown operations \['g'\]"):
        Registry(ops=("f",)).register("numpy", {"f": fwd, "g": bwd})


def test_a_kernel_whose_parameters_differ_is_an_error_at_registration():
    def other_fwd(x, weight=None, *, eps=1e-6, out=None):      # another default
        return x, {}

    reg = Registry(ops=("f",))
    reg.register("numpy", {"f": fwd})
    with pytest.raises(RegistryError, match="differ"):
        reg.register("numba", {"f": other_fwd})


def test_a_kernel_may_take_extra_keyword_only_arguments():
    def fast_fwd(x, weight=None, *, eps=1e-5, out=None, stream=None):
        return x, {}

    reg = Registry(ops=("f",))
    reg.register("numpy", {"f": fwd})
    reg.register("numba", {"f": fast_fwd})
    assert reg.implementation("numba", "f") is fast_fwd


def test_a_loader_runs_once_on_the_first_lookup():
    calls = []

    def load(reg):
        calls.append(1)
        reg.register("numba", {"f": fwd}, complete=True)

    reg = Registry(ops=("f",), loaders={"numba": load})
    assert not calls
    assert reg.implementation("numba", "f") is fwd
    assert reg.implementation("numba", "f") is fwd
    assert calls == [1]


def test_an_unregistered_operation_is_a_clear_error():
    with pytest.raises(RegistryError, match="no implementation registered"):
        Registry(ops=("f",)).implementation("numpy", "f")
    with pytest.raises(ValueError, match="backend: expected"):
        REGISTRY.implementation("jax", "layer_norm_forward")


@pytest.mark.parametrize("op", OPS)
def test_every_operation_has_both_implementations(op):
    reference = next(getattr(home, op) for home in (sn, activations, updates) if hasattr(home, op))   # nn's: there
    assert REGISTRY.implementation("numpy", op) is reference
    assert REGISTRY.implementation("numba", op).__module__.startswith("scratchnorm.fast.")


def test_importing_scratchnorm_imports_no_numba():
    code = "import sys, scratchnorm; assert 'numba' not in sys.modules and 'scratchnorm.fast' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
