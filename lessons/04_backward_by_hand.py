"""Backward by hand: the gradients and Jacobians of LayerNorm and RMSNorm.

Write g = dL/dx_hat (= dy * weight). Walking the graph node by node (the
"staged" backward in layernorm.py and rmsnorm.py) and simplifying gives

    LayerNorm  dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))
    RMSNorm    dx = rstd * (g - x_hat * mean(g * x_hat))

The mean(g) term is LayerNorm's mean subtraction, seen from the backward side;
RMSNorm has no mean, so it has no such term. Both are a projection of g
times rstd: the Jacobians (eps = 0) are

    J_rms = rstd * (I - x_hat x_hat^T / d)                (the paper's R matrix)
    J_ln  = rstd * (I - 1 1^T / d - x_hat x_hat^T / d)

J_rms removes the direction x_hat (rank d - 1): scaling x does not change y,
so no gradient points along x. J_ln also removes 1 (rank d - 2): adding a
constant to x does not change y either. So dx . x = 0 for RMSNorm, and
sum(dx) = 0 and dx . x_hat = 0 for LayerNorm.

What about the explainer's claim that RMSNorm's gradient is "more stable",
without the noise of the mean? The mean of one row is computed exactly from
that row: it carries no sampling noise. The measurement below compares the
size of dx and its spread over random rows and upstream gradients. With
zero-mean inputs both are the same (ratio sqrt((d-1)/(d-2)), one more
direction kept). With a mean m, RMSNorm's gradient is smaller by the
deterministic factor std/RMS = 1/sqrt(1 + m^2/s^2), because it divides by the
RMS, which includes the mean; its relative spread does not change. So the
claim, as stated, does not hold.

Figures
* 04_backward_by_hand_jacobians.png: J - rstd*I for d = 12 (what each Jacobian
  removes: x_hat x_hat^T / d, and for LayerNorm also 1 1^T / d), and the
  singular values: one (RMSNorm) or two (LayerNorm) are zero to round-off.
* 04_backward_by_hand_grad_size.png: ||dx|| * std(x) against mean(x)/std(x),
  mean and +-1 standard deviation over rows, with the formulas.
* 04_backward_by_hand_gradcheck.png: every RMSNorm/LayerNorm case of
  scratchnorm.gradcheck against central finite differences.
"""
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python lessons/04_backward_by_hand.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import matplotlib.pyplot as plt
import numpy as np

import scratchnorm as sn
from lessons._common import APPROX, COMMON, FAILS, HOLDS, check, explainer, grade, paper, run_alone
from scratchnorm.gradcheck.cases import all_cases

FAMILY = ("RMSNorm", "LayerNorm", "PartialRMSNorm", "SimpleRMSNorm")


def rel_diff(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


def cosine(a, b):
    return np.abs(np.sum(a * b, axis=-1)) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def staged_vs_closed(lesson, rng, d):
    x = rng.standard_normal((lesson.pick(64, 512), d)) + 0.7
    w, b, dy = rng.standard_normal(d), rng.standard_normal(d), rng.standard_normal(x.shape)
    _, c_ln = sn.layer_norm_forward(x, w, b)
    _, c_rms = sn.rms_norm_forward(x, w)
    err_ln = max(rel_diff(sn.layer_norm_backward(dy, c_ln)[k], sn.layer_norm_backward_staged(dy, c_ln)[k])
                 for k in ("x", "weight", "bias"))
    err_rms = max(rel_diff(sn.rms_norm_backward(dy, c_rms)[k], sn.rms_norm_backward_staged(dy, c_rms)[k])
                  for k in ("x", "weight"))
    lesson.claim("LayerNorm's closed-form backward rstd(g − mean g − x̂ mean(g x̂)) equals the chain rule "
                 "node by node", source=COMMON, measured=f"max relative difference {err_ln:.1e}",
                 verdict=grade(err_ln, 1e-12, 1e-6), expect=HOLDS)
    lesson.claim("RMSNorm's backward is R applied to g: rstd(g − x̂ mean(g x̂)) equals the chain rule node by node",
                 source=paper("§4.2"), measured=f"max relative difference {err_rms:.1e}",
                 verdict=grade(err_rms, 1e-12, 1e-6), expect=HOLDS)


def jacobians(lesson, rng):
    d = 12
    a = np.sort(rng.standard_normal(d)) + 0.8       # sorted: x_hat x_hat^T shows as a smooth pattern
    J_rms, J_ln = sn.rms_norm_jacobian(a), sn.layer_norm_jacobian(a)
    s_rms, s_ln = np.linalg.svd(J_rms, compute_uv=False), np.linalg.svd(J_ln, compute_uv=False)
    x_hat = (a - a.mean()) / a.std()
    null_rms = np.linalg.norm(J_rms @ a) / np.linalg.norm(a)
    null_ln = max(np.linalg.norm(J_ln @ np.ones(d)), np.linalg.norm(J_ln @ x_hat)) / np.sqrt(d)
    check(np.allclose(J_rms, J_rms.T) and np.allclose(J_ln, J_ln.T), "both Jacobians are symmetric")
    check(s_rms[-2] > 1e-3 * s_rms[0] and s_ln[-3] > 1e-3 * s_ln[0], "no other direction is removed")

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.3), constrained_layout=True)
    off = {"RMSNorm": J_rms - np.eye(d) / np.sqrt(np.mean(a**2)), "LayerNorm": J_ln - np.eye(d) / a.std()}
    formula = {"RMSNorm": "−rstd·x̂x̂ᵀ/d", "LayerNorm": "−rstd·(11ᵀ + x̂x̂ᵀ)/d"}
    for ax, (name, M) in zip(axes, off.items()):
        lim = np.abs(M).max()
        im = ax.imshow(M, cmap="RdBu_r", vmin=-lim, vmax=lim)
        ax.set(title=f"{name}: J − rstd·I = {formula[name]}", xlabel="input index j (x sorted)",
               ylabel="output index i")
        fig.colorbar(im, ax=ax, shrink=0.8)
    k = np.arange(1, d + 1)
    axes[2].semilogy(k, s_rms, "o-", label="RMSNorm: 1 zero (direction x)")
    axes[2].semilogy(k, np.maximum(s_ln, 1e-18), "s-", label="LayerNorm: 2 zeros (1 and x̂)")
    axes[2].set(title="singular values", xlabel="index", ylabel="singular value (log)", ylim=(1e-18, 10))
    axes[2].legend(loc="center left")
    fig.suptitle(f"Jacobians at one input (d = {d}, mean(x) = {a.mean():.2f}, eps = 0)")
    lesson.save(fig, "jacobians")
    return s_rms, s_ln, null_rms, null_ln


def run(lesson):
    rng = np.random.default_rng(4)
    d = 32
    staged_vs_closed(lesson, rng, d)

    s_rms, s_ln, null_rms, null_ln = jacobians(lesson, rng)
    x = rng.standard_normal((lesson.pick(200, 2000), d)) + 0.5
    dy = rng.standard_normal(x.shape)
    dx_rms = sn.rms_norm_backward(dy, sn.rms_norm_forward(x, eps=0.0)[1])["x"]
    dx_ln = sn.layer_norm_backward(dy, sn.layer_norm_forward(x, eps=0.0)[1])["x"]
    x_hat = sn.layer_norm_forward(x, eps=0.0)[0]
    cos_rms = cosine(dx_rms, x).max()
    cos_ln = max(cosine(dx_ln, np.ones(d)).max(), cosine(dx_ln, x_hat).max())
    lesson.claim("RMSNorm's Jacobian R has rank d − 1: it removes x, so dx ⟂ x", source=paper("§4.2"),
                 measured=f"smallest/largest singular value {s_rms[-1] / s_rms[0]:.1e} (next "
                          f"{s_rms[-2] / s_rms[0]:.2f}); |R x|/|x| = {null_rms:.1e}; max |cos(dx, x)| = {cos_rms:.1e}",
                 verdict=grade(max(s_rms[-1] / s_rms[0], cos_rms), 1e-12, 1e-6), expect=HOLDS)
    lesson.claim("LayerNorm's Jacobian has rank d − 2: it removes 1 and x̂, so sum(dx) = 0 and dx ⟂ x̂",
                 source=COMMON, measured=f"two smallest/largest singular values {s_ln[-2] / s_ln[0]:.1e}, "
                                         f"{s_ln[-1] / s_ln[0]:.1e}; max |cos(dx, 1)|, |cos(dx, x̂)| = {cos_ln:.1e}",
                 verdict=grade(max(s_ln[-2] / s_ln[0], cos_ln, null_ln), 1e-12, 1e-6), expect=HOLDS)

    # Gradient size and spread against the input's mean.
    z = rng.standard_normal((lesson.pick(500, 5000), d))
    z = (z - z.mean(axis=1, keepdims=True)) / z.std(axis=1, keepdims=True)   # mean 0, std 1
    dy = rng.standard_normal(z.shape)
    ratios = np.linspace(0, 8, 17)
    size = {"RMSNorm": [], "LayerNorm": []}
    for m in ratios:
        dxs = {"RMSNorm": sn.rms_norm_backward(dy, sn.rms_norm_forward(z + m)[1])["x"],
               "LayerNorm": sn.layer_norm_backward(dy, sn.layer_norm_forward(z + m)[1])["x"]}
        for name, dx in dxs.items():
            norms = np.linalg.norm(dx, axis=1)                # std(x) = 1, so this is ||dx|| * std
            size[name].append((norms.mean(), norms.std()))
    size = {k: np.array(v) for k, v in size.items()}
    ratio0 = size["RMSNorm"][0, 0] / size["LayerNorm"][0, 0]
    spread = {k: v[:, 1] / v[:, 0] for k, v in size.items()}   # relative spread over rows, per mean
    less_noise = 1 - spread["RMSNorm"].mean() / spread["LayerNorm"].mean()
    check(abs(ratio0 - np.sqrt((d - 1) / (d - 2))) < 0.02, "at mean 0 the sizes differ by sqrt((d-1)/(d-2))")
    shrink = size["RMSNorm"][:, 0] / size["LayerNorm"][:, 0] * np.sqrt((d - 2) / (d - 1))
    check(np.allclose(shrink, 1 / np.sqrt(1 + ratios**2), rtol=0.02), "RMSNorm's dx shrinks as std/RMS")
    verdict = HOLDS if less_noise > 0.2 else APPROX if less_noise > 0.05 else FAILS
    lesson.claim("RMSNorm's gradients are more stable: free of the noise the mean brings",
                 source=explainer("000", "§8.1"),
                 measured=f"mean 0: ‖dx‖ ratio RMS/LN {ratio0:.3f} (= √((d−1)/(d−2))); relative spread over rows "
                          f"{spread['RMSNorm'].mean():.3f} vs {spread['LayerNorm'].mean():.3f}; with a mean m the "
                          f"RMSNorm gradient only shrinks by 1/√(1+m²/s²) ({shrink[-1]:.3f} at m/s = {ratios[-1]:g})",
                 verdict=verdict, expect=FAILS)

    fig, ax = plt.subplots(figsize=(7, 4.3))
    theory = {"RMSNorm": np.sqrt((d - 1) / (1 + ratios**2)), "LayerNorm": np.full_like(ratios, np.sqrt(d - 2))}
    for (name, v), color in zip(size.items(), ("tab:blue", "tab:orange")):
        ax.fill_between(ratios, v[:, 0] - v[:, 1], v[:, 0] + v[:, 1], color=color, alpha=0.2)
        ax.plot(ratios, v[:, 0], "o", color=color, ms=4, label=f"{name}: mean ± std over {len(z)} rows")
        ax.plot(ratios, theory[name], color=color, linewidth=1,
                label=r"$\approx\sqrt{(d-1)/(1+m^2/s^2)}$" if name == "RMSNorm" else r"$\approx\sqrt{d-2}$")
    ax.set(xlabel="mean(x) / std(x)", ylabel="‖dx‖ · std(x)  (dy ~ N(0, I))",
           title=f"Gradient size: same spread, RMSNorm only rescaled by std/RMS (d = {d})")
    ax.legend()
    lesson.save(fig, "grad_size")

    # The gradient checks of the library, as a table.
    cases = [c for c in all_cases() if c.label.startswith(FAMILY)]
    rows = []
    for case in cases:
        layer, xc = case.build("numpy")
        report = sn.gradcheck(layer, xc)
        check(report.ok, f"gradcheck failed for {case.label}:\n{report}")
        rows.append([case.label, str(xc.shape), f"{report.max_rel_err:.1e}", "ok"])
    if lesson.verbose:
        print("\n".join(f"  {r[0]:<38} {r[1]:<13} {r[2]:>8}  {r[3]}" for r in rows))
    fig, ax = plt.subplots(figsize=(7.5, 0.24 * (len(rows) + 1)))
    ax.axis("off")
    table = ax.table(cellText=rows, colLabels=["case (numpy backend)", "input shape", "max rel err", "status"],
                     cellLoc="left", bbox=[0, 0, 1, 1], colWidths=[0.55, 0.17, 0.17, 0.11])
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    ax.set_title(f"gradcheck against central differences: float64, random dy, tolerance 1e-6, {len(rows)} cases",
                 fontsize=10)
    lesson.save(fig, "gradcheck")


if __name__ == "__main__":
    sys.exit(run_alone(__file__))
