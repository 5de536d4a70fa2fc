"""The health verdict on a fitted transfer rule; the first that applies wins.

1. ``too_few_sizes`` (< 3 distinct sizes) or ``fallback`` (an optimum is a best trial, not a fit).
2. ``edge``: an optimum sits at the edge of its searched range.
3. ``noisy``: the slope interval is too wide, degenerate, or (μP) straddles a tolerance bound.
4. ``sp_corrected``: standard parametrization; the exponent is the correction.
5. ``drifting`` / 6. ``stable``: μP and the interval outside / inside ±tolerance.

Yang et al. 2022, Tensor Programs V, §3, Table 1; Everett et al. 2024, ICML, §4."""
from __future__ import annotations

import math
from dataclasses import dataclass

from mutune.scaling.rules import TransferRule

__all__ = ["Verdict", "rule_verdict", "VERDICTS"]

VERDICTS = ("too_few_sizes", "fallback", "edge", "noisy", "sp_corrected", "drifting",
            "stable", "per_choice", "not_transferred")


@dataclass(frozen=True)
class Verdict:
    """A named health verdict on a transfer rule."""
    name: str
    reason: str
    advice: str


def _fmt(x: float) -> str:
    return f"{x:+.3f}"


def _check_args(rule: TransferRule, parametrization: str, tolerance: float,
                edge_side: str | None, axis: str) -> None:
    if parametrization not in ("mup", "sp"):
        raise ValueError(f"parametrization = {parametrization!r}: must be 'mup' or 'sp'")
    if not (math.isfinite(tolerance) and tolerance > 0):
        raise ValueError(f"tolerance = {tolerance}: must be a finite number > 0")
    if edge_side not in (None, "low", "high"):
        raise ValueError(f"edge_side = {edge_side!r}: must be None, 'low' or 'high'")
    if axis not in rule.axes:
        raise ValueError(f"axis = {axis!r}: the rule was fitted on {list(rule.axes)}")


def _edge_verdict(hp: str, edge_side: str | None) -> Verdict:
    where = {"low": "the lower bound", "high": "the upper bound"}.get(edge_side or "",
                                                                      "a bound")
    widen = {"low": "extend the range downwards (smaller values)",
             "high": "extend the range upwards (larger values)"}.get(
                 edge_side or "", "widen the searched range on the side it touches")
    return Verdict("edge", f"{hp}: an optimum lies at {where} of the searched range, so "
                   "it is censored and the fitted slope is biased", widen)


def _sp_verdict(hp: str, scheme: str, axis: str, b: float, iv: str) -> Verdict:
    return Verdict("sp_corrected",
                   f"{hp}: under {scheme} the fitted {axis} exponent b = {_fmt(b)} (95 % "
                   f"{iv}) is the correction that makes transfer work: "
                   f"{hp}*({axis[0]}) ∝ {axis[0]}^{b:.3g}",
                   {"width": "use the fitted rule for the target, or switch to μP to "
                             "make b ≈ 0",
                    "depth": "use the fitted rule for the target, or set "
                             "model.depth_parametrization: completep to make it ≈ 0"}.get(
                       axis, "use the fitted rule for the target"))


def _drifting_verdict(hp: str, scheme: str, axis: str, b: float, iv: str,
                      tolerance: float) -> Verdict:
    return Verdict("drifting",
                   f"{hp}: slope b = {_fmt(b)} with 95 % interval {iv} lies outside "
                   f"±{tolerance:g}: the optimum moves with {axis} under {scheme}",
                   ("check the μP set-up (coord check, MuReadout, base shapes, Mu* "
                    "optimizer); the fitted rule still extrapolates") if axis == "width"
                   else ("check the depth set-up (mutune coord-check --axis depth, "
                         "model.base_depth); the fitted rule still extrapolates"))


def rule_verdict(rule: TransferRule, *, parametrization: str, tolerance: float = 0.1,
                 on_edge: bool = False, edge_side: str | None = None,
                 max_residual: float = math.log(2),
                 fallback: str | None = None, axis: str = "width") -> Verdict:
    """Name the health of a transfer rule along one axis (precedence in the module docstring).

    Args:
        tolerance: largest |b| still called scale-independent, in log-log slope units; > 0.
        max_residual: largest residual scale of the log optima about the line (natural log).
        axis: the rule's axis judged; along depth ``"mup"`` means a depth parametrization (Dey
            et al. 2025, §3), along steps ``"sp"`` judges a correction (Bjorck et al. 2025).
    Raises:
        ValueError: unknown parametrization or edge_side, tolerance ≤ 0, an axis the rule
            was not fitted on."""
    _check_args(rule, parametrization, tolerance, edge_side, axis)
    along = rule.scales if axis == "width" else rule.extra_scales[axis]
    n_sizes = len(set(along))
    hp = rule.hyperparameter
    b = rule.slope if axis == "width" else rule.coefficients[axis]
    lo, hi = rule.slope_interval if axis == "width" else rule.intervals[axis]
    scheme = {("width", "mup"): "μP", ("width", "sp"): "SP",
              ("depth", "mup"): "a depth parametrization",
              ("depth", "sp"): "no depth parametrization"}.get(
        (axis, parametrization), "μP (which does not remove it)")
    finite = math.isfinite(lo) and math.isfinite(hi)
    iv = f"[{_fmt(lo)}, {_fmt(hi)}]" if finite else "undefined"
    if n_sizes < 3:
        return Verdict("too_few_sizes",
                       f"{hp}: {n_sizes} proxy size(s) along {axis}; a rule needs ≥ 3 before "
                       f"its {axis} slope's interval can be trusted (with 2 it comes from the "
                       "optima's own intervals alone: no residual checks the line)",
                       f"add a proxy {axis} (e.g. double the largest) and rerun its sweep")
    if fallback:
        return Verdict("fallback", f"{hp}: a per-size optimum is the best trial, not a fitted "
                       f"optimum ({fallback}); its slope interval means nothing",
                       "more samples per sweep (or confirmation replicates) so every size's "
                       "fit has more points than parameters")
    if on_edge:
        return _edge_verdict(hp, edge_side)
    width = hi - lo if finite else math.inf
    if finite and width == 0:
        return Verdict("noisy", f"{hp}: slope interval {iv} has zero width: the optima are "
                       "identical values without intervals, so the data say nothing of "
                       "their uncertainty", "more samples per sweep or more seeds")
    if not finite or width > 4 * tolerance or rule.residual_scale > max_residual:
        return Verdict("noisy",
                       f"{hp}: slope interval {iv} (width {width:.3g} vs 4×tolerance = "
                       f"{4 * tolerance:.3g}), residual scale {rule.residual_scale:.3g} "
                       f"(max {max_residual:.3g}) in log units",
                       f"more samples per sweep or more seeds per configuration, or more "
                       f"{axis}s")
    if parametrization == "sp":
        return _sp_verdict(hp, scheme, axis, b, iv)
    if lo > tolerance or hi < -tolerance:
        return _drifting_verdict(hp, scheme, axis, b, iv, tolerance)
    if -tolerance <= lo and hi <= tolerance:
        return Verdict("stable", f"{hp}: slope b = {_fmt(b)} with 95 % interval {iv} inside "
                       f"±{tolerance:g}: {axis}-independent as {scheme} predicts", "")
    return Verdict("noisy", f"{hp}: slope interval {iv} straddles ±{tolerance:g}: cannot tell "
                   "stable from drifting", f"more seeds per configuration or another {axis}")

