"""Issue 27, "experiments on the page", for lessons 04, 07 and 15: what defines an experiment (the model, the
data, the quantity measured, the seeds) is in the lesson's cells; their helper modules hold only figures.

Read from the source (ast), nothing runs: a helper module of these lessons defines only ``plot_*`` functions,
draws no random numbers and calls no layer of the library; the lessons import from the lessons' underscore
modules only plumbing (an allow-list below) and figures; the experiments' own functions and seeds stand in the
lessons.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

LESSONS = Path(__file__).resolve().parents[2] / "lessons"
PLOTS = ("_backward_plots", "_batch_plots")

# What these lessons may import from the lessons' underscore modules besides a plotting module's plot_*:
# the lesson's context and grading, interval arithmetic and fits, printing, finite differences, colours.
PLUMBING = {
    "lessons._common": None,                    # None: any name (start, check, the verdicts, the sources)
    "lessons._grading": {"below", "above"},
    "lessons._stats": {"rms", "fit_slope", "mean_interval", "geometric_interval", "first_crossing"},
    "lessons._training": {"report", "interval"},
    "lessons._differences": {"vjp_by_differences"},
    "lessons._style": {"color"},
}

# The experiment of each lesson, defined in its own cells: functions and the seeds of its generators.
ON_THE_PAGE = {
    "04_backward_by_hand": ({"layer", "noise_to_signal", "mean_over_std"}, {40, 4}),
    "07_batch_statistics": ({"sample", "normalize_over", "channel_affine_residual"}, {7}),
    "15_the_papers_other_claims": ({"layer", "noise_to_signal", "eq8_change", "train_norm"}, {15, 1}),
}


def tree(name: str) -> ast.Module:
    return ast.parse((LESSONS / f"{name}.py").read_text(encoding="utf-8"))


def called(node: ast.AST) -> str:
    """The dotted name of a call's function: "np.random.default_rng", "sn.rms_norm_forward", "plt.subplots"."""
    parts, f = [], node.func
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    if isinstance(f, ast.Name):
        parts.append(f.id)
    return ".".join(reversed(parts))


@pytest.mark.parametrize("name", PLOTS)
def test_a_plotting_module_defines_only_plots(name):
    module = tree(name)
    for node in module.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            assert not any(m.split(".")[0] == "scratchnorm" for m in modules), \
                f"lessons/{name}.py line {node.lineno} imports scratchnorm: a figure module computes no layer"
        elif isinstance(node, ast.FunctionDef):
            assert node.name.startswith("plot_"), \
                f"lessons/{name}.py defines {node.name}(): only plot_* functions here; an experiment goes in its lesson"
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):   # the docstring
            raise AssertionError(f"lessons/{name}.py line {node.lineno}: {type(node).__name__} at the top level; "
                                 "a figure module holds imports and plot_* functions only (classes, data and "
                                 "constants of an experiment go in its lesson)")
    for node in ast.walk(module):
        if isinstance(node, ast.Call):
            assert not called(node).startswith(("np.random", "numpy.random", "random.")), \
                f"lessons/{name}.py line {node.lineno} calls {called(node)}: a figure module makes no data"


@pytest.mark.parametrize("lesson", sorted(ON_THE_PAGE))
def test_a_lesson_imports_only_plumbing_and_figures(lesson):
    for node in ast.walk(tree(lesson)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lessons._"):
            names = {a.name for a in node.names}
            if node.module.removeprefix("lessons.") in PLOTS:
                allowed = {n for n in names if n.startswith("plot_")}
            else:
                assert node.module in PLUMBING, f"{lesson} imports from {node.module}, which is not plumbing here"
                allowed = names if PLUMBING[node.module] is None else PLUMBING[node.module]
            assert names <= allowed, (f"{lesson} imports {sorted(names - allowed)} from {node.module}: "
                                      "write the experiment in the lesson's cells")


@pytest.mark.parametrize("lesson", sorted(ON_THE_PAGE))
def test_the_experiment_is_defined_in_the_lesson(lesson):
    functions, seeds = ON_THE_PAGE[lesson]
    module = tree(lesson)
    defined = {n.name for n in ast.walk(module) if isinstance(n, ast.FunctionDef)}
    assert functions <= defined, f"{lesson} no longer defines {sorted(functions - defined)} in its cells"
    seeded = {c.args[0].value for c in ast.walk(module) if isinstance(c, ast.Call)
              and called(c).endswith("default_rng") and c.args and isinstance(c.args[0], ast.Constant)}
    assert seeds <= seeded, f"{lesson} no longer seeds its generators with {sorted(seeds - seeded)} in its cells"
