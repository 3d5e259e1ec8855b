"""One colour per normalization, the same in every lesson's figures.

A reader who has seen RMSNorm in blue in lesson 02 finds it in blue in lesson 18. Look a colour up by the
layer's name as a lesson writes it, in any case: ``color("RMSNorm")``, ``color("rmsnorm")``.
"""
from __future__ import annotations

# RMSNorm blue, LayerNorm orange (lesson 02 first drew them so); the rest from matplotlib's tab palette.
NORM_COLORS = {
    "rmsnorm": "tab:blue",
    "layernorm": "tab:orange",
    "batchnorm": "tab:green",
    "prmsnorm": "tab:purple",
    "dyt": "tab:red",
    "groupnorm": "tab:brown",
    "instancenorm": "tab:pink",
    "gemmarmsnorm": "tab:cyan",
    "add_rmsnorm": "tab:olive",
    "l2norm": "tab:gray",
    "none": "0.45",
}


def color(name: str) -> str:
    """The colour of the normalization called ``name`` ("RMSNorm", "layernorm", "pRMSNorm", "no norm", ...)."""
    key = name.lower().replace(" ", "").replace("-", "")
    key = {"nonorm": "none", "partialrmsnorm": "prmsnorm"}.get(key, key)
    if key not in NORM_COLORS:
        raise KeyError(f"name: expected one of {sorted(NORM_COLORS)} (any case); received {name!r}. "
                       f"Fix: add the normalization to NORM_COLORS in lessons/_style.py.")
    return NORM_COLORS[key]
