"""Issue 27, "experiments on the page", for the training lessons 10, 11, 12, 16, 19, 20 and 27.

What defines an experiment (the model, the data, the measured quantity, the seeds) is written in the lesson's
cells; their helper modules keep plumbing (the race, timing, threads, intervals, printing) and plotting. Read
as source (ast), nothing runs.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LESSONS = ROOT / "lessons"

#: every top-level name each helper module may define: plumbing (_training) or figures (the *_plots modules)
PLUMBING = {
    "_training.py": {"expect", "_openblas", "one_blas_thread", "paired", "interval", "seeds_to_decide", "report",
                     "forecast_check", "train_step", "Curve", "warm_up", "race", "interleaved_medians", "pm"},
    "_training_plots.py": {"STYLE", "seed_mean", "plot_race", "plot_chance_race", "plot_costs", "plot_regions",
                           "plot_norm_map", "plot_dyt_race", "plot_per_seed"},
    "_placement_plots.py": {"LINE", "PLACEMENT_STYLE", "plot_gradients", "plot_sweep", "plot_depth",
                            "plot_logits_and_sweep"},
}
#: calls that build a model, an optimizer or a layer, or draw data or seeds: the experiment's, so the lesson's
EXPERIMENT_CALLS = {"Transformer", "mlp", "make_norm", "Adam", "SGD", "Linear", "DyT", "LayerNorm", "RMSNorm",
                    "default_rng", "windows", "char_data", "standard_normal", "integers", "uniform", "normal"}
#: per lesson, what its own cells must define (def) or call: its model, data, seeds and measured quantity
ON_THE_PAGE = {
    "10_training_curves": ({"spirals", "models", "accuracy", "time_to", "time_ratio"}, {"mlp", "default_rng"}),
    "11_pre_vs_post_norm": ({"transformer", "stream_off_unit_std", "sweep"},
                            {"Transformer", "default_rng", "windows"}),
    "27_gradients_at_initialization": ({"transformer", "ffn_gradients", "top_over_bottom", "deep_runs"},
                                       {"Transformer", "default_rng", "windows"}),
    "12_tiny_transformer": ({"transformer", "train", "noise_procedure"}, {"Transformer", "default_rng", "windows"}),
    "16_questions_answered_by_training": ({"spirals", "evaluate", "spirals_race", "row_mean_task"},
                                          {"mlp", "default_rng"}),
    "19_transformers_without_normalization": ({"transformer", "train", "normalized", "tail_slope", "final"},
                                              {"Transformer", "DyT", "default_rng", "windows"}),
    "20_where_the_norm_goes": ({"transformer", "ffn_gradients", "top_over_bottom", "placement_race",
                                "stream_variances", "max_logit"}, {"Transformer", "default_rng", "windows"}),
}


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def top_level_names(module: ast.Module) -> set[str]:
    names = set()
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def called(module: ast.AST) -> set[str]:
    """The names called anywhere: ``f(...)`` and ``x.f(...)`` both give ``f``."""
    out = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Call):
            f = node.func
            out.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
    return out


def defined(module: ast.Module) -> set[str]:
    return {n.name for n in ast.walk(module) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


@pytest.mark.parametrize("name", sorted(PLUMBING))
def test_a_helper_module_defines_only_plumbing_or_figures(name):
    extra = top_level_names(tree(LESSONS / name)) - PLUMBING[name]
    assert not extra, (f"lessons/{name} defines {sorted(extra)}: a model, data or measured quantity belongs in the "
                       f"lesson's cells (issue 27); plumbing or a figure goes on this test's list")


@pytest.mark.parametrize("name", sorted(PLUMBING))
def test_a_helper_module_builds_no_model_and_draws_no_data(name):
    calls = called(tree(LESSONS / name)) & EXPERIMENT_CALLS
    assert not calls, f"lessons/{name} calls {sorted(calls)}: the experiment's models and data are built on the page"


@pytest.mark.parametrize("stem", sorted(ON_THE_PAGE))
def test_a_lesson_writes_its_experiment_in_its_cells(stem):
    module = tree(LESSONS / f"{stem}.py")
    names, calls = ON_THE_PAGE[stem]
    assert names <= defined(module), f"{stem}: {sorted(names - defined(module))} are not defined on the page"
    assert calls <= called(module), f"{stem}: {sorted(calls - called(module))} are not called on the page"
