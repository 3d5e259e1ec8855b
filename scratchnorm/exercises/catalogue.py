"""The five exercises, their contracts, and the catalogue of mistakes the checker can name.

An exercise says what the student writes (``functions``: name -> its parameters), which gradients the
backward returns, how its statistic is laid out (``layout``) and computed (``knobs``, see mutants.py), and
which codes of the catalogue apply to it. ``MISTAKES`` holds, per code, the sentence a report prints: the
mistake, and the term of the derivation it comes from.
"""
from __future__ import annotations

from dataclasses import dataclass

from .mutants import Knobs, Layout

ROW, BATCH = Layout("row"), Layout("batch")


@dataclass(frozen=True)
class Exercise:
    name: str
    title: str
    functions: dict            # name -> parameters, in order
    grads: tuple               # the keys the backward returns
    layout: Layout             # for groupnorm, groups come from the call (num_groups)
    knobs: Knobs
    codes: tuple               # the codes that apply (besides those of any exercise: correct, unrecognized,
    #                            raised_an_error, values_misplaced)
    forward_text: str          # the forward, as formulas
    derive_text: str           # what to derive
    hint: str                  # unfolded only if the student wants it
    questions: tuple           # ((question, answer), ...), answers shown once the check passes

    def layout_for(self, kwargs) -> Layout:
        return Layout("group", kwargs["num_groups"]) if self.name == "groupnorm" else self.layout

    def knobs_for(self, kwargs) -> Knobs:
        return self.knobs.with_(k=kwargs["k"], n_stat=kwargs["k"]) if self.name == "prmsnorm" else self.knobs


COMMON_CODES = ("cache_unpacked_in_another_order", "eps_hard_coded", "dweight_reduced_to_scalar",
                "missing_projection_term", "projection_factor", "sign_error", "missing_rstd", "weight_not_applied",
                "dweight_uses_x", "dweight_not_reduced", "eps_outside_sqrt", "eps_missing", "eps_subtracted",
                "eps_dropped_in_backward", "whole_array_statistics", "mutates_dy", "wrong_shape")
CENTRED = ("missing_mean_term", "direct_path_only", "unbiased_variance", "dweight_wrong_array", "x_not_centred")

LN_FORWARD = """mu    = mean(x)                       over the last axis (d features)
var   = mean((x - mu)^2)
rstd  = 1 / sqrt(var + eps)
x_hat = (x - mu) * rstd
y     = x_hat * weight + bias"""

RMS_FORWARD = """ms    = mean(x^2)                     over the last axis (d features)
rstd  = 1 / sqrt(ms + eps)              (eps inside the root)
x_hat = x * rstd
y     = x_hat * weight"""

EXERCISES = {e.name: e for e in (
    Exercise(
        "layernorm", "LayerNorm over the last axis: forward and backward",
        {"forward": ("x", "weight", "bias", "eps"), "backward": ("dy", "x", "weight", "eps")},
        ("x", "weight", "bias"), ROW, Knobs(),
        COMMON_CODES + CENTRED + ("one_pass_variance", "reduced_over_wrong_axis", "reduced_without_axis",
                                  "dout_missing", "weight_out_of_sum", "wrong_count"),
        LN_FORWARD,
        "dL/dx, dL/dweight and dL/dbias, given dy = dL/dy (same shape as x). Every leading axis of x is a batch "
        "axis: the parameter gradients sum over all of them.",
        "Write g = dy * weight = dL/dx_hat. x_i reaches the loss three ways: directly through x_hat_i, through "
        "mu, and through var. Differentiate each. The path through var gives a term along x_hat; the path "
        "through mu gives a term along the all-ones vector; the part of the mu path that goes through var "
        "vanishes because sum(x - mu) = 0.",
        (("Why is sum(dx) = 0 over each row?",
          "Adding a constant c to every feature of a row leaves y unchanged (mu absorbs it), so the directional "
          "derivative of L along the all-ones vector is 0: sum_i dL/dx_i = 0."),
         ("Why is sum(dx * x_hat) = 0 over each row?",
          "Scaling x - mu by (1 + t) leaves x_hat unchanged (for eps -> 0), so dL/dx is orthogonal to x - mu."),
         ("What is the rank of the Jacobian dy/dx of one row (weight 1, eps 0)?",
          "d - 2: it removes the directions 1 and x_hat.")),
    ),
    Exercise(
        "rmsnorm", "RMSNorm over the last axis, eps inside the root: forward and backward",
        {"forward": ("x", "weight", "eps"), "backward": ("dy", "x", "weight", "eps")},
        ("x", "weight"), ROW, Knobs(center=False), COMMON_CODES + ("spurious_mean_term", "dout_missing",
                                                                   "weight_out_of_sum", "wrong_count"),
        RMS_FORWARD,
        "dL/dx and dL/dweight, given dy = dL/dy. Leading axes of x are batch axes.",
        "g = dy * weight. x_i reaches the loss directly (through x_hat_i = x_i * rstd) and through ms, which "
        "every x_hat_j shares. d ms / d x_i = 2 x_i / d and d rstd / d ms = -rstd^3 / 2. There is no mean, "
        "so there is no term along the all-ones vector.",
        (("Why is sum(dx * x) = 0 over each row (eps -> 0)?",
          "RMSNorm(s x) = RMSNorm(x) for s > 0, so the derivative along x itself is 0."),
         ("Why does RMSNorm's backward have no -mean(g) term, when LayerNorm's does?",
          "That term comes from the mean mu; RMSNorm subtracts no mean, so nothing routes the gradient through "
          "one.")),
    ),
    Exercise(
        "batchnorm", "BatchNorm in training mode, statistics per channel: forward and backward",
        {"forward": ("x", "weight", "bias", "eps"), "backward": ("dy", "x", "weight", "eps")},
        ("x", "weight", "bias"), BATCH, Knobs(),
        COMMON_CODES + CENTRED + ("one_pass_variance", "reduced_over_wrong_axis", "reduced_without_axis",
                                  "running_stats_in_training", "dout_missing", "wrong_count",
                                  "reshaped_without_transpose"),
        "x has shape (N, C) or (N, C, *positions). For each channel c, over the N examples and all positions:\n"
        + LN_FORWARD.replace("over the last axis (d features)", "over N and the positions, per channel"),
        "dL/dx, dL/dweight (C,) and dL/dbias (C,), given dy. The batch statistics depend on every example, "
        "so dx of one example depends on the whole batch.",
        "It is LayerNorm's derivation with 'the row' replaced by 'one channel across the batch and the "
        "positions': the means in the formula run over those M = N * positions elements.",
        (("Why does dx of one example depend on the other examples of the batch?",
          "mu and var are computed from the whole batch, so moving one example moves the statistics every "
          "other example is normalized with."),
         ("What does sum(dx) over N and the positions equal, per channel?", "0, as in LayerNorm: a constant "
          "added to a channel is absorbed by its mean.")),
    ),
    Exercise(
        "prmsnorm", "Partial RMSNorm: the statistic reads the first k features: backward",
        {"backward": ("dy", "x", "weight", "eps", "k")},
        ("x", "weight"), ROW, Knobs(center=False), COMMON_CODES + ("spurious_mean_term", "prefix_ignored",
                                                                   "dout_missing", "weight_out_of_sum"),
        RMS_FORWARD.replace("mean(x^2)                     over the last axis (d features)",
                            "mean(x[..., :k]^2)            over the first k features only")
        + "\n(every one of the d features is divided by the same rstd)",
        "dL/dx and dL/dweight, given dy.",
        "Only the first k features move ms: d ms / d x_i = 2 x_i / k for i < k, and 0 for the others. The "
        "statistic term therefore lands on the first k features only, while its sum runs over all d.",
        (("Why does a feature beyond the first k get the plain gradient rstd * g_i?",
          "It does not enter ms, so its only path to the loss is its own x_hat_i."),
         ("Is sum(dx * x) = 0 still true?", "Yes (eps -> 0): scaling the whole row scales the prefix too, so "
          "pRMSNorm keeps RMSNorm's invariance to scaling.")),
    ),
    Exercise(
        "groupnorm", "GroupNorm: statistics per example and group of channels: forward and backward",
        {"forward": ("x", "weight", "bias", "num_groups", "eps"),
         "backward": ("dy", "x", "weight", "num_groups", "eps")},
        ("x", "weight", "bias"), Layout("group", 2), Knobs(),
        COMMON_CODES + CENTRED + ("reduced_over_wrong_axis", "reduced_without_axis", "groupnorm_per_position",
                                  "dout_missing", "weight_out_of_sum"),
        "x has shape (N, C, *positions); the C channels form num_groups groups of C // num_groups. For each "
        "example and group, over its channels and positions:\n"
        + LN_FORWARD.replace("over the last axis (d features)", "over the group's channels and positions")
        + "\n(weight and bias are per channel: (C,))",
        "dL/dx, dL/dweight (C,) and dL/dbias (C,), given dy.",
        "Reshape x to (N, G, C // G, *positions): then it is LayerNorm over the last axes, except that the "
        "weight varies along the group's channels, so g = dy * weight is formed before the means.",
        (("What is GroupNorm with num_groups = 1? With num_groups = C?",
          "A LayerNorm over (C, *positions) per example (with a per-channel affine); an InstanceNorm."),
         ("Why are dweight and dbias summed over N and the positions but not over the channels?",
          "They are per-channel parameters: each one is used at every example and position of its channel.")),
    ),
)}

# code -> the sentence a report prints: the mistake, and where in the derivation it comes from.
MISTAKES = {
    "correct": "Correct.",
    "missing_mean_term": "dx lacks -rstd * mean(g): the path through the mean mu. Every x_j moves mu by 1/n, "
                         "and mu is subtracted from every feature, which gives -rstd * mean(g) for each i.",
    "spurious_mean_term": "dx includes -rstd * mean(g), as LayerNorm's does. RMSNorm subtracts no mean, so no "
                          "gradient flows through one: drop that term.",
    "missing_projection_term": "dx lacks the term along x_hat, -rstd * x_hat * mean(g * x_hat): the path through "
                               "the variance (or mean square), which every x_hat_j shares (in a staged backward: "
                               "dvar, or its share of dx, left out).",
    "direct_path_only": "dx = rstd * g: the direct path only. x_i also reaches the loss through mu, "
                        "-rstd * mean(g), and through var, -rstd * x_hat * mean(g * x_hat).",
    "n_factor": "A term carries a wrong factor of n, the count of one group (see which below): the paths through "
                "the mean and the variance average over the group's n elements, so each carries exactly one 1/n. A "
                "sum where a mean belongs gives n times the term (dmu added to dx without / N); a mean of a mean, "
                "1/n of it.",
    "wrong_count": "A term is divided by the count of other axes (see which below): N, the batch, where D, the "
                   "features, belongs, as a LayerNorm written from BatchNorm's code keeps N = x.shape[0]. Each path "
                   "averages over the elements of one statistic, so it carries 1/n of that statistic's count.",
    "x_not_centred": "A sum of the backward uses x where x - mean belongs (see which below): the path through the "
                     "variance is dvar = sum(dx_hat * (x - mu)) * -0.5 * (var + eps)^(-3/2), and x alone adds "
                     "mu * sum(dx_hat), which no path gives.",
    "multiplied_where_it_divides": "A term is multiplied by std where it must be divided by it (see which below): "
                                   "x_hat = (x - mu) / std, so every path from x_i carries 1/std = rstd (dmean = "
                                   "-sum(dx_hat) / std, not * std).",
    "jacobian_diagonal_only": "dx_i uses only dy_i/dx_i, the Jacobian's diagonal (see below whether that diagonal "
                              "is itself right). But every x_j moves the mean and the variance that every x_hat_i "
                              "uses, so dx_i = sum_j g_j * dx_hat_j/dx_i: the off-diagonal entries add the mean "
                              "path, -rstd * mean(g), and the variance path, -rstd * x_hat * mean(g * x_hat), both "
                              "sums over the whole row (channel, group). Write dx = rstd * (g - mean(g) - x_hat * "
                              "mean(g * x_hat)).",
    "projection_factor": "The term along x_hat has the wrong factor (x2 or x1/2): check d/dv v^(-1/2) = "
                         "-(1/2) v^(-3/2) and d/dx x^2 = 2x; the 1/2 and the 2 cancel.",
    "sign_error": "One correction term has the wrong sign: both -rstd * mean(g) and -rstd * x_hat * mean(g * x_hat) "
                  "are subtracted from rstd * g.",
    "missing_rstd": "dx is not multiplied by rstd: x_hat = (x - mu) * rstd, so every path from x_i carries a "
                    "factor rstd.",
    "weight_not_applied": "dx is computed with g = dy, as if weight were 1: the gradient reaching x_hat is "
                          "g = dy * weight.",
    "dweight_uses_x": "dweight is sum(dy * x); the weight multiplies x_hat, so dweight = sum(dy * x_hat).",
    "dweight_not_reduced": "A parameter gradient is not summed over every axis its parameter is shared across "
                           "(the batch axes, and for channel layers the positions): it has the wrong shape.",
    "unbiased_variance": "This is the exact result of a forward whose variance divides by (n - 1): the layer "
                         "uses the biased variance, sum((x - mu)^2) / n.",
    "eps_outside_sqrt": "This is the exact result of rstd = 1 / (sqrt(var) + eps): eps goes inside the root, "
                        "rstd = 1 / sqrt(var + eps).",
    "eps_missing": "There is no eps: rstd = 1 / sqrt(var). The layer adds eps under the root, "
                   "rstd = 1 / sqrt(var + eps), in the forward and so in every rstd of the backward.",
    "eps_subtracted": "eps is subtracted: rstd = 1 / sqrt(var - eps). It is added, rstd = 1 / sqrt(var + eps), "
                      "which keeps the root above zero.",
    "eps_dropped_in_backward": "The forward adds eps, but the backward leaves it out somewhere: every rstd of the "
                               "backward is the forward's 1 / sqrt(var + eps) (in dvar: (var + eps)^(-3/2)).",
    "whole_array_statistics": "One mean and one variance for the whole array (np.mean(x) without axis=): the "
                              "statistics are per row (LayerNorm), per channel (BatchNorm), per example and group "
                              "(GroupNorm).",
    "groupnorm_per_position": "The statistics run over the group's channels at each position separately: GroupNorm "
                              "takes one mean and variance per example and group, over the group's channels and "
                              "all positions (reshape to (N, G, C // G * H * W) before reducing).",
    "running_stats_in_training": "In training mode the running averages stand in for the batch's statistics (see "
                                 "where below: the forward, or the backward's mean and variance). Training "
                                 "normalizes with the batch's own mean and variance, which depend on x, so the "
                                 "gradient flows through them too (the mean and x_hat terms); the running averages "
                                 "are only updated, for test mode, where no batch statistics are taken.",
    "one_pass_variance": "The forward computes the variance as E[x^2] - E[x]^2: right for zero-mean inputs, but "
                         "it cancels catastrophically when the mean is large against the spread. Use two passes: "
                         "mu first, then mean((x - mu)^2).",
    "reduced_over_wrong_axis": "A reduction runs over other axes: the whole normalization (BatchNorm per example, "
                               "LayerNorm per feature over the batch, GroupNorm per channel or per example over "
                               "all channels, or with G and C/G swapped), or one sum or mean of "
                               "the forward or the backward (see which below): check its axis=.",
    "prefix_ignored": "The statistic term of pRMSNorm is spread wrongly: it is subtracted from the first k "
                      "features only (they alone enter ms), and its sum is divided by k, not by d.",
    "reduced_without_axis": "A sum or mean runs over the whole array (np.sum(a) without axis=, see which below): "
                            "it gives one number where there is one per row, channel or group. Give it the axes of "
                            "one statistic (and keepdims=True).",
    "cache_unpacked_in_another_order": "The backward unpacks the cache in another order than the forward packed "
                                       "it (see which items below; std read where rstd = 1 / std belongs, x - mean "
                                       "where gamma belongs: items of other shapes broadcast, so nothing raises). "
                                       "Unpack it in the order of the forward's `cache = (...)`, or cache a dict "
                                       "and read it by name.",
    "dout_missing": "A gradient is computed without dout (see which below). The chain rule multiplies every local "
                    "derivative by the upstream gradient: the gradient reaching x_hat is g = dout * gamma, not gamma "
                    "alone (in BatchNorm, g = gamma makes dx zero), and dgamma = sum(dout * x_hat), not sum(x_hat).",
    "dweight_wrong_array": "dgamma is summed from another array than dout * x_hat (see which below): gamma "
                           "multiplies x_hat = (x - mean) * rstd, so dL/dgamma = sum(dout * x_hat) over the batch "
                           "axes; x - mean lacks the factor rstd.",
    "dweight_reduced_to_scalar": "dgamma (or dbeta) is summed to one number (np.sum without axis=): each weight has "
                                 "its own gradient, summed over the batch axes (and the positions) only.",
    "eps_hard_coded": "An eps of its own is written into the code (see where below: the forward, or the backward "
                      "where it takes its own root of the variance), not the one given: the checker passes its own "
                      "eps through bn_param (ln_param, gn_param; in scratchnorm's contract the eps argument). Read "
                      "it with eps = bn_param.get('eps', 1e-5), and let the backward use the forward's (cache it).",
    "weight_out_of_sum": "The weight is pulled out of a sum over the features (see which below): "
                         "sum(dout * gamma * x_hat) is not gamma * sum(dout * x_hat) when gamma varies along the "
                         "summed axis. Keep g = dout * gamma inside the sum.",
    "summed_before_use": "dx_hat = dout * gamma is summed over the batch before it is used (see how below): every "
                         "example then gets the batch's total in place of its own dx_hat, and the sums over the "
                         "batch that follow act on that total. dx_hat stays per example, (N, D); a sum over the "
                         "batch belongs inside the mean and variance terms only: dx = (dx_hat - mean(dx_hat, "
                         "axis=0) - x_hat * mean(dx_hat * x_hat, axis=0)) / std.",
    "mutates_dy": "The backward writes into its dy argument (e.g. g = dy; g *= weight): the caller's dy is "
                  "changed. Compute g = dy * weight instead.",
    "reshaped_without_transpose": "x of shape (N, C, H, W) was flattened with reshape(-1, C) and no transpose: each "
                                  "column of that view mixes channels and positions, so the statistics, gamma and "
                                  "beta fall on the wrong elements. Move the channels last first, x.transpose(0, 2, "
                                  "3, 1).reshape(-1, C), and turn the result back with reshape(N, H, W, "
                                  "C).transpose(0, 3, 1, 2).",
    "values_misplaced": "The right numbers in the wrong places (see below how they are laid out): reshape keeps "
                        "the order of the elements and only regroups them, transpose moves the axes. An array "
                        "transposed with transpose(0, 2, 3, 1) goes back with transpose(0, 3, 1, 2), not with "
                        "reshape(N, C, H, W).",
    "wrong_shape": "A returned gradient has the wrong shape: dx has x's shape, dweight and dbias the weight's.",
    "raised_an_error": "Your code raised an error (above, with its line): what that function should return was "
                       "not checked, so nothing says it is right. Fix the error and check again.",
    "unrecognized": "Wrong, and no mistake of the catalogue reproduces it: see below what is true of it.",
}
# wrong_shape's sentence when the forward's output alone has it (its found and fix: detectors.forward_shape)
FORWARD_WRONG_SHAPE = "The forward's output has the wrong shape: it should have x's shape, one value per element of x."
