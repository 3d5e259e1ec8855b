"""Where the ledger's citations lead: each citation a lesson uses, in English, with its anchor in SOURCES.md.

A lesson cites ``paper("§4.2")`` or ``explainer("002", "§1.2 作用 (point 5)")``: the section as the source
numbers it. The ledger is read by students who may not read Chinese and cannot open the project's copies of
the sources, so every citation is looked up here: ``resolve("002", "§1.2 作用 (point 5)")`` gives
``("§1.2 (what it does), point 5", "explainer-002-s1-2-what-it-does")``, an English name and the anchor of
lessons/SOURCES.md that describes that section. A citation missing from CITATIONS is an error, so that no
citation reaches the ledger without a place to follow it to; tests/lessons/test_sources.py checks that every
citation in the lessons resolves and that every anchor exists.

This module imports nothing from ``lessons._common`` so that ``_common`` can import it.
"""
from __future__ import annotations

from scratchnorm._checks import fail

SOURCES_MD = "lessons/SOURCES.md"          # from the repository root

# source_key -> (how the ledger names the source, anchor of its section in SOURCES.md)
SOURCES = {
    "paper": ("RMSNorm paper (Zhang & Sennrich 2019)", "paper"),
    "000": ("explainer 000", "explainer-000"),
    "001": ("explainer 001", "explainer-001"),
    "002": ("explainer 002", "explainer-002"),
    "003": ("explainer 003", "explainer-003"),
    "dyt": ("DyT paper (Zhu, Chen, He, LeCun & Liu 2025, Transformers without Normalization)", "dyt"),
    "periln": ("Peri-LN paper (Kim et al. 2025)", "periln"),
    "laarhoven": ("van Laarhoven 2017, L2 Regularization versus Batch and Weight Normalization", "laarhoven"),
    "zhang-wd": ("Zhang, Wang, Xu & Grosse 2019, Three Mechanisms of Weight Decay Regularization", "zhang-wd"),
    "santurkar": ("Santurkar, Tsipras, Ilyas & Madry 2018, How Does Batch Normalization Help Optimization?",
                  "santurkar"),
    "mnist1d": ("MNIST-1D paper (Greydanus 2020, Scaling down Deep Learning)", "mnist1d"),
    "groupnorm": ("GroupNorm paper (Wu & He 2018, Group Normalization)", "groupnorm"),
    "wu-johnson": ('Wu & Johnson 2021, Rethinking "Batch" in BatchNorm', "wu-johnson"),
    "threads": ("the thread runtimes' documentation and reports (libgomp, numba, OpenBLAS)", "threads"),
    "common": ("common wisdom", "common-wisdom"),
}

_PRMS = "pRMSNorm (described in the abstract and §1; the translation has no §4.3)"

# (source_key, section as the lessons pass it) -> (the section in English, anchor in SOURCES.md)
CITATIONS = {
    ("paper", "abstract, §1"): ("abstract, §1 (introduction)", "paper-abstract"),
    ("paper", "§1"): ("§1 (introduction)", "paper-s1"),
    ("paper", "§1, Figure 1"): ("§1 (introduction), Figure 1 (LayerNorm against no normalization)",
                                "paper-figure-1"),
    ("paper", "§4"): ("§4 (RMSNorm)", "paper-s4"),
    ("paper", "§4.1, Table 1"): ("§4.1 (invariance analysis), Table 1", "paper-table-1"),
    ("paper", "§4.1, §4.2"): ("§4.1 (invariance analysis), §4.2 (gradient analysis)", "paper-s4-1"),
    ("paper", "§4.2"): ("§4.2 (gradient analysis)", "paper-s4-2"),
    ("paper", "§4.2, eq. 8"): ("§4.2 (gradient analysis), eq. 8", "paper-eq-8"),
    ("paper", "§4.2, eq. 9"): ("§4.2 (gradient analysis), eq. 9", "paper-eq-9"),
    ("paper", "§4.2, eq. 10"): ("§4.2 (gradient analysis), eq. 10", "paper-eq-10"),
    ("paper", "§4.3"): (_PRMS, "paper-prmsnorm"),
    ("paper", "§4.3 and its code"): (_PRMS + " and its released code", "paper-prmsnorm"),
    ("000", "§2.2, §10.1"): ("§2.2 (LayerNorm's problems), §10.1 (advantages)", "explainer-000-s2-2"),
    ("000", "§5.1"): ("§5.1 (a basic RMSNorm), its default eps = 1e-8", "explainer-000-s5-1"),
    ("000", "§10.2"): ("§10.2 (drawbacks)", "explainer-000-s10-2"),
    ("000", "§6"): ("§6 (variants: learnable eps, RMSNorm with a bias)", "explainer-000-s6"),
    ("000", "§5.2"): ("§5.2 (optimized version: rsqrt instead of a square root)", "explainer-000-s5-2"),
    ("000", "§7.1, §10.1"): ("§7.1 (complexity table), §10.1 (advantages)", "explainer-000-s7-1"),
    ("000", "§8.1"): ("§8.1 (why RMSNorm works)", "explainer-000-s8-1"),
    ("000", "§8.2"): ("§8.2 (mathematical properties)", "explainer-000-s8-2"),
    ("000", "§8.3"): ("§8.3 (convergence analysis)", "explainer-000-s8-3"),
    ("001", "§一.2"): ("§1.2 (RMSNorm is proposed)", "explainer-001-s1-2"),
    ("001", "§四 (demo)"): ("§4 (PyTorch implementation), its demo's printed output", "explainer-001-s4-demo"),
    ("001", "§6"): ("§6 (RMSNorm in Pre-Norm and Post-Norm)", "explainer-001-s6"),
    ("002", "§1.1"): ("§1.1 (code: an RMSNorm module)", "explainer-002-s1-1"),
    ("002", "§1.3.1 (1) code"): ("§1.3.1 (other normalizations), (1) BatchNorm, its code", "explainer-002-s1-3-1-1"),
    ("002", "§1.2"): ("§1.2 (analysis), its formula part", "explainer-002-s1-2"),
    ("002", "§1.2 作用 (point 5)"): ("§1.2 (what it does), point 5", "explainer-002-s1-2-what-it-does"),
    ("002", "§1.3.1 (1), points 3-4"): ("§1.3.1 (other normalizations), (1) BatchNorm, points 3-4",
                                       "explainer-002-s1-3-1-1"),
    ("002", "§1.3.1 (2) and (4)"): ("§1.3.1 (other normalizations), (2) LayerNorm and (4) GroupNorm",
                                   "explainer-002-s1-3-1"),
    ("002", "§1.3.1 (4), point 6"): ("§1.3.1 (other normalizations), (4) GroupNorm, point 6",
                                    "explainer-002-s1-3-1-4"),
    ("003", "Transformer 中的归一化位置"): ("§1, part 'where normalization sits in a Transformer'",
                                          "explainer-003-s1-placement"),
    ("003", "§6"): ("§6 (RMSNorm code, line by line: ByteRMSNorm)", "explainer-003-s6"),
    ("003", "§2.3"): ("§2.3 (RMSNorm's formula)", "explainer-003-s2-3"),
    ("003", "§2.5 table"): ("§2.5 (summary comparison), its table", "explainer-003-s2-5"),
    ("dyt", "abstract"): ("abstract", "dyt-abstract"),
    ("dyt", "tanh-like mappings"): ("the section on what normalization layers do: LayerNorm's tanh-like, "
                                    "S-shaped input-output maps in trained Transformers", "dyt-tanh-like"),
    ("dyt", "efficiency"): ("the efficiency analysis: DyT against RMSNorm, time of the layers and of LLaMA 7B",
                            "dyt-efficiency"),
    ("dyt", "initialization of alpha"): ("the section on the initial alpha: alpha0 = 0.5 for most models, "
                                         "smaller for large language models", "dyt-alpha"),
    ("periln", "abstract"): ("abstract", "periln-abstract"),
    ("periln", "variance growth"): ("the analysis of hidden-state variance against depth for Pre-, Post- and "
                                    "Peri-LN", "periln-variance"),
    ("periln", "gradient norms"): ("the measurements of gradient norms per layer", "periln-gradients"),
    ("laarhoven", "abstract"): ("abstract: with normalization, L2 regularization sets the scale of the weights "
                                "and so the effective learning rate, and has no regularizing effect",
                                "laarhoven-abstract"),
    ("santurkar", "§2"): ("§2 (BatchNorm and internal covariate shift): noisy BatchNorm", "santurkar-s2"),
    ("santurkar", "§3"): ("§3 (why does BatchNorm work?): the smoothing effect", "santurkar-s3"),
    ("mnist1d", "benchmarks"): ("its benchmark table: the test accuracy of logistic regression, an MLP, a CNN and a "
                                "GRU on MNIST-1D", "mnist1d-benchmarks"),
    ("groupnorm", "abstract"): ("abstract: BatchNorm's error rises as the batch shrinks, GroupNorm's accuracy is "
                                "stable across batch sizes", "groupnorm-abstract"),
    ("groupnorm", "Figure 1"): ("Figure 1: ImageNet error against the batch size per worker, BatchNorm and "
                                "GroupNorm", "groupnorm-figure-1"),
    ("groupnorm", "Figure 2"): ("Figure 2: the axes of (N, C, H, W) each of BatchNorm, LayerNorm, InstanceNorm and "
                                "GroupNorm normalizes", "groupnorm-figure-2"),
    ("groupnorm", "GroupNorm's two ends"): ("GroupNorm with one group is LayerNorm over (C, H, W), with C groups "
                                            "InstanceNorm over (H, W)", "groupnorm-ends"),
    ("wu-johnson", "§3"): ("§3 (population statistics): the running average lags the weights; PreciseBN "
                           "recomputes the statistics after training, the weights fixed", "wu-johnson-s3"),
    ("threads", "libgomp OMP_WAIT_POLICY"): ("libgomp's manual, OMP_WAIT_POLICY: waiting threads spin a while, "
                                             "then sleep", "threads-omp-wait-policy"),
    ("threads", "libgomp GOMP_SPINCOUNT"): ("libgomp's manual, GOMP_SPINCOUNT: how long a waiting thread spins",
                                            "threads-gomp-spincount"),
    ("threads", "numba threading layers"): ("numba's manual, The Threading Layers: what runs parallel=True",
                                            "threads-numba-layers"),
    ("threads", "OpenBLAS #731"): ("OpenBLAS issue 731: threads slow a program of many small BLAS calls",
                                   "threads-openblas-731"),
    ("common", ""): ("", "common-wisdom"),
}


def resolve(source_key: str, section: str) -> tuple[str, str]:
    """(the section in English, its anchor in SOURCES.md) for a citation a lesson makes.

    ``source_key`` is "paper", an explainer's number "000".."003", or "common" (with section "").
    """
    if source_key not in SOURCES:
        fail(ValueError, "source_key", f"one of {', '.join(map(repr, SOURCES))}", source_key,
             "cite the paper with paper(section) and an explainer by its number, e.g. explainer(\"000\", \"§8.1\").")
    try:
        return CITATIONS[(source_key, section)]
    except KeyError:
        known = "; ".join(repr(s) for k, s in CITATIONS if k == source_key)
        fail(LookupError, "section", f"a citation of {source_key!r} listed in lessons/_sources.py ({known})", section,
             f"add ({source_key!r}, {section!r}) to CITATIONS in lessons/_sources.py with the section's name in "
             f"English and its anchor in {SOURCES_MD} (describe the section there first if it has no anchor).")


def cite(source_key: str, section: str = "") -> str:
    """The ledger's text for a citation: the source, the section in English, and where to read about it."""
    text, anchor = resolve(source_key, section)
    name = SOURCES[source_key][0]
    return f"{name} {text} ({SOURCES_MD}#{anchor})" if text else f"{name} ({SOURCES_MD}#{anchor})"
