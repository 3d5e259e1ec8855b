"""The ledger's summary: each claim of a source once, where the source made it, and the rows that bear on it.

A source claim can be tested by several lessons under different conditions: the paper's "7%–64% less
running time" is about whole models on GPUs, and lessons 09, 10 and 12 measure one layer and two small
models on a CPU. The ledger's rows keep those measurements apart; the summary puts them side by side under
the claim as the source states it, so that a reader sees every verdict the claim received and why they can
differ. A row belongs to an entry when its claim text contains one of the entry's ``rows`` phrases;
tests/lessons/test_grading.py checks that every row citing the paper or an explainer belongs to exactly one
entry, and that every entry has a row.

This module imports nothing from ``lessons._common`` so that ``_common`` can import it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from lessons._grading import FAILS, HOLDS


@dataclass(frozen=True)
class Entry:
    claim: str          # the source's claim, in our words
    source: str         # who makes it (the rows carry the exact section and its link)
    there: str          # the conditions under which the source made it
    here: str           # the conditions under which the lessons test it
    rows: tuple         # phrases of the lessons' claim texts that belong here
    setting: str = ""   # a pattern of the row's own text (claim, then measured) shown beside its lesson: the
                        # knob that decides the verdict, when the lessons set it apart (pRMSNorm's k)


PAPER, E000, E001, E002, E003 = "the paper", "explainer 000", "explainer 001", "explainer 002", "explainer 003"
ONE_LAYER = "one layer, float32/float64, this CPU"
SMALL_MODELS = "small models trained on this CPU, several seeds"

SUMMARY = (
    Entry("RMSNorm runs 7%–64% faster than LayerNorm", PAPER, "the running time of whole models (RNNs among them)",
          f"{ONE_LAYER} (09, 10); {SMALL_MODELS} (10, 12)",
          ("7%–64%", "costs less than LayerNorm's", "sooner in wall-clock time")),
    Entry("RMSNorm trains as well as LayerNorm", PAPER, "machine translation, image classification, image-caption "
          "retrieval and question answering", SMALL_MODELS, ("trains as well as LayerNorm", "reaches LayerNorm's")),
    Entry("pRMSNorm (p = 6.25%) is competitive with RMSNorm, and cheaper", PAPER, "the same models, p = 6.25%",
          f"the estimate at d = 1024 (06); {SMALL_MODELS} (10, 12); one layer (06)",
          ("pRMSNorm with p = 6.25%", "prefix RMS is a good estimate", "pRMSNorm is faster",
           "pRMSNorm at p = 6.25%"), setting=r"k = \d+"),
    Entry("pRMSNorm's statistic reads k = ⌈d·p⌉ features", PAPER, "§4.3, and its released code's int(d·p)",
          "every (d, p) of a grid (06)", ("k from the released",)),
    Entry("Re-scaling invariance, not re-centering invariance (Table 1)", PAPER, "derived (§4.1)",
          "measured on random layers (03) and a deep MLP (01)", ("is invariant (Y) or not (N)", "Scaling the weights")),
    Entry("RMSNorm puts vectors on a sphere of radius √d and equals LayerNorm at mean 0", PAPER, "derived (§4)",
          "random vectors (02)", ("sphere of radius", "When mean(x) = 0")),
    Entry("The gradient analysis: R, and an implicit learning rate", PAPER, "derived (§4.2)",
          "finite differences and small networks (04, 05, 15)",
          ("R(δa)", "dL/dW =", "dL/dW is", "Large weights get smaller", "backward is R applied",
           "Jacobian R has rank", "keeps the weights from growing")),
    Entry("Re-centring is dispensable: it does not reduce the variance of hidden states or gradients", PAPER,
          "the hypothesis of §1, tested there by whole-model results", "the gradient noise of one layer on ReLU "
          "features, centred readout, several seeds (15; the hidden states' variance is derived there, 1 + m²/s² "
          "for a steady mean, and checked, not graded)", ("Re-centring does not reduce",)),
    Entry("Normalizing by the Euclidean norm instead of the RMS does not work", PAPER, "stated in §4",
          SMALL_MODELS + " (16)", ("Euclidean norm",)),
    Entry("LayerNorm needs fewer steps than no normalization but each costs more (Figure 1)", PAPER,
          "the introduction's illustration", SMALL_MODELS + " (10)", ("fewer steps than without", "each of its steps")),
    Entry("RMSNorm halves the computation; it needs one pass where LayerNorm needs two", E000, "stated",
          f"{ONE_LAYER} (09); float32 statistics (08)", ("halves the computation", "needs one pass")),
    Entry("RMSNorm's gradients are more stable", E000, "stated", "gradient noise over minibatches (04)",
          ("more stable: free of the noise",)),
    Entry("RMSNorm is scale invariant: RMSNorm(kx) = RMSNorm(x)", E000, "stated", "random vectors (02)",
          ("RMSNorm(kx)",)),
    Entry("A 'convergence analysis' by adding noise to an input", E000, "a script that never trains",
          "the same procedure, and real training (12)", ("Adding noise to a fixed input",)),
    Entry("rsqrt makes RMSNorm faster", E000, "stated", f"{ONE_LAYER} (13)", ("rsqrt",)),
    Entry("RMSNorm saves memory: it stores no mean", f"{E000}, {E003}", "stated",
          "the bytes each implementation keeps (13)", ("saves memory",)),
    Entry("Its demo's printed output", E001, "a demo's printed output", "its own code on its printed input (14)",
          ("Explainer 001's demo prints", "demo's RMSNorm output")),
    Entry("RMSNorm with a bias is 'close to LayerNorm'", E000, "its code's docstring, without a run",
          SMALL_MODELS + ", trained side by side (16)", ("RMSNorm with a bias",)),
    Entry("RMSNorm may do worse on tasks that need centring", E000, "stated (drawbacks)",
          "a label that is the row mean, several seeds (16)", ("needs the centring statistic",)),
    Entry("Its default eps = 1e-8 prevents division by zero", E000, "its code", "float16 and float32 (14)",
          ("eps = 1e-8",)),
    Entry("ByteRMSNorm's .float() prevents overflow in half precision", E003, "its code, line by line",
          "float16 rows up to |x| = 32768 (14)", ("ByteRMSNorm",)),
    Entry("A BatchNorm module, as code", E002, "its code", "(N, C, H, W) inputs; running statistics (14)",
          ("Explainer 002's BatchNorm",)),
    Entry("The RMS of RMSNorm's output is about 1", E001, "a demo's printed output", "deep MLP (01), random "
          "vectors (02)", ("output is about 1",)),
    Entry("RMSNorm is 7%–10% faster than LayerNorm", E001, "stated", ONE_LAYER + " (09)", ("7%–10% faster",)),
    Entry("RMSNorm's advantage over LayerNorm is larger in Pre-Norm", E001, "stated",
          SMALL_MODELS + " (11)", ("shows more in Pre-Norm",)),
    Entry("Normalization keeps activations and gradients from vanishing or exploding", E002, "stated",
          "a deep MLP at initialization (01)", ("stays about constant", "vanishing and exploding")),
    Entry("BatchNorm depends on the batch; LayerNorm, RMSNorm and GroupNorm do not", E002, "stated",
          "a fixed example in random batches (07)",
          ("BatchNorm does badly", "BatchNorm behaves differently", "do not depend on the batch",
           )),
    Entry("GroupNorm with one group is LayerNorm, with one channel per group InstanceNorm", E002, "stated",
          "the definitions, without the affine (07)", ("GroupNorm with G = 1",)),
    Entry("RMSNorm is numerically more stable in FP16/BF16", E003, "its summary table",
          "rounded inputs against float64 (08)", ("numerically more stable", "carries the input's variation")),
    Entry("x + Sublayer(LayerNorm(x)) is Post-Norm", E003, "stated", "what defines Post-Norm, a stream normalized "
          "after every block, at initialization (11)", ("is Post-Norm",)),
    # real data (lessons 23, 24): scikit-learn's digits and MNIST-1D, made offline
    Entry("RMSNorm matches LayerNorm's accuracy, on data sets the lessons did not draw", PAPER, "machine "
          "translation, image classification, image-caption retrieval and question answering", "an MLP on "
          "scikit-learn's digits (23); a 1-D CNN on MNIST-1D, the norms over its 25 channels (24); several seeds",
          ("matches LayerNorm's test accuracy", "no worse than LayerNorm's")),
    Entry("pRMSNorm with a representative k matches RMSNorm", PAPER, "p = 6.25%: k = 64 of d = 1024",
          "k = 32 of d = 512, the wide layer of an MLP on scikit-learn's digits (23); several seeds",
          ("matches RMSNorm's test accuracy",)),
)


def entry_of(claim_text: str) -> list[int]:
    """The indices of the summary entries a ledger row belongs to (normally one)."""
    return [i for i, e in enumerate(SUMMARY) if any(p in claim_text for p in e.rows)]


def shown_value(c: dict, digits: int = 3) -> str:
    """'0.968 [0.885, 1.06]' for a claim graded on an interval, '0.968' for one graded on a single value (or
    on a one-seed interval, which is a point)."""
    f = f"{{:.{digits}g}}".format
    iv = c.get("interval")
    return f(c["value"]) + (f" [{f(iv[0])}, {f(iv[1])}]" if iv and iv[0] < iv[1] else "")


def control_said(ctrl: dict, verdict: str) -> str:
    """'control, no norm against LayerNorm: does not hold (0.05 [0.03, 0.07])': an equivalence's placebo,
    graded on the claim's bounds, beside the claim's ``verdict``; a control that does not fail the bound the claim
    met leaves the claim inconclusive by construction (lessons/_grading.py, ``beside_control``)."""
    said = f"control, {ctrl['label']}: {ctrl['verdict']} ({shown_value(ctrl, 4)})"
    if ctrl["verdict"] == FAILS:
        return said
    if verdict == HOLDS:                         # it fails the holds bound wholly, not the approximate one
        return said + ", wholly outside the holds bound the claim met"
    return said + ", so the bound cannot tell the two apart"


def summary_lines(entries: dict, md_cell) -> list[str]:
    """The summary section of CLAIMS.md for the ledger ``entries`` {lesson stem: entry}."""
    found = {i: [] for i in range(len(SUMMARY))}
    for e in entries.values():
        for c in e["claims"]:
            for i in entry_of(c["claim"]):
                timed = " (timed)" if c.get("timed") else ""
                setting = SUMMARY[i].setting and re.search(SUMMARY[i].setting, f"{c['claim']} {c['measured']}")
                where = f"{e['number']} ({setting.group(0)})" if setting else e["number"]
                found[i].append(f"{where}: {c['verdict']}{timed} ({shown_value(c)})")
    lines = ["## Summary", "",
             "Each claim of a source once, with where the source made it, where the lessons test it, and the "
             "verdict of every row below that bears on it (lesson: verdict (value [interval])), in the order of "
             "the rows; *(timed)* marks a value from a timer, graded on this machine under its load. "
             "*Inconclusive* is its own outcome: the data could not tell, which refutes nothing. "
             "Verdicts differ when the conditions do: one layer is not a whole model, and this CPU is not the "
             "source's machine.", "",
             "| source claim | source | made for | tested here on | rows |", "|---|---|---|---|---|"]
    for i, s in enumerate(SUMMARY):
        rows = "; ".join(found[i]) or "not run"
        lines.append("| " + " | ".join(md_cell(v) for v in (s.claim, s.source, s.there, s.here, rows)) + " |")
    return lines + [""]
