"""The health verdict on a fitted transfer rule; the first that applies wins.

1. ``too_few_sizes`` (< 3 distinct sizes) or ``fallback`` (an optimum is a best trial, not a fit).
2. ``edge``: an optimum sits at the edge of its searched range.
3. SP: ``noisy`` when the slope interval is too wide or degenerate, else ``sp_corrected`` (the
   exponent is the correction).
4. μP, the slope's interval excluding 0: ``drifting`` — the optimum moves, so the rule is
   extrapolated and the set-up flagged (never ``noisy``).
5. μP, the interval containing 0, a loss surface given (:mod:`mutune.scaling.stake`):
   ``stable`` when the transferred value's uncertainty costs at most ``loss_tolerance`` of the
   loss, else ``noisy`` — a direction the loss is flat in is healthy however vague its optimum.
6. μP without a surface: ``noisy`` when the interval is wide, degenerate or straddles
   ±tolerance, else ``stable``.

Yang et al. 2022, Tensor Programs V, §3, Table 1; Everett et al. 2024, ICML, §4."""
from __future__ import annotations

import math
from dataclasses import dataclass

from mutune.scaling.rules import TransferRule
from mutune.scaling.stake import LossAtStake

__all__ = ["Verdict", "rule_verdict", "VERDICTS", "MAX_RESIDUAL"]

#: largest residual scale of the log optima about a rule's line (natural log) before it is noisy
MAX_RESIDUAL = math.log(2)

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
                edge: str | None, axis: str, loss_tolerance: float) -> None:
    if parametrization not in ("mup", "sp"):
        raise ValueError(f"parametrization = {parametrization!r}: must be 'mup' or 'sp'")
    if not (math.isfinite(tolerance) and tolerance > 0):
        raise ValueError(f"tolerance = {tolerance}: must be a finite number > 0")
    if not (math.isfinite(loss_tolerance) and 0 < loss_tolerance < 1):
        raise ValueError(f"loss_tolerance = {loss_tolerance}: must be in (0, 1)")
    if edge not in (None, "low", "high", "unknown"):
        raise ValueError(f"edge = {edge!r}: must be None, 'low', 'high' or 'unknown'")
    if axis not in rule.axes:
        raise ValueError(f"axis = {axis!r}: the rule was fitted on {list(rule.axes)}")


def _edge_verdict(hp: str, edge_side: str) -> Verdict:
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
                      stake: LossAtStake | None) -> Verdict:
    cost = f"; the extrapolated value's uncertainty costs at most {stake.describe()}" \
        if stake is not None else ""
    return Verdict("drifting",
                   f"{hp}: slope b = {_fmt(b)} with 95 % interval {iv} excludes 0: the optimum "
                   f"moves with {axis} under {scheme}, so the rule is extrapolated{cost}",
                   ("check the μP set-up (coord check, MuReadout, base shapes, Mu* "
                    "optimizer); the fitted rule still extrapolates") if axis == "width"
                   else ("check the depth set-up (mutune coord-check --axis depth, "
                         "model.base_depth); the fitted rule still extrapolates"))


def rule_verdict(rule: TransferRule, *, parametrization: str, tolerance: float = 0.1,
                 edge: str | None = None, fallback: str | None = None, axis: str = "width",
                 stake: LossAtStake | None = None, loss_tolerance: float = 0.005) -> Verdict:
    """Name the health of a transfer rule along one axis (precedence in the module docstring).

    Args:
        tolerance: largest |b| still called scale-independent without a surface, in log-log
            slope units; > 0.
        edge: ``"low"`` / ``"high"``: an optimum sits at that bound of its searched range;
            ``"unknown"``: at a bound, side unknown; None: no optimum on an edge.
        axis: the rule's axis judged; along depth ``"mup"`` means a depth parametrization (Dey
            et al. 2025, §3), along steps ``"sp"`` judges a correction (Bjorck et al. 2025).
        stake: what the transferred value's uncertainty costs at the target; μP rules whose
            interval contains 0 are judged on it.
        loss_tolerance: the largest ``stake.relative`` still ``stable``, a share in (0, 1).
    Raises:
        ValueError: unknown parametrization or edge, tolerance ≤ 0, loss_tolerance outside
            (0, 1), an axis the rule was not fitted on."""
    _check_args(rule, parametrization, tolerance, edge, axis, loss_tolerance)
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
    if edge is not None:
        return _edge_verdict(hp, edge)
    if finite and hi - lo == 0:
        return Verdict("noisy", f"{hp}: slope interval {iv} has zero width: the optima are "
                       "identical values without intervals, so the data say nothing of "
                       "their uncertainty", "more samples per sweep or more seeds")
    if parametrization == "sp":
        return _slope_noise(rule, hp, axis, iv, tolerance) or _sp_verdict(hp, scheme, axis, b,
                                                                          iv)
    if finite and (lo > 0 or hi < 0):
        return _drifting_verdict(hp, scheme, axis, b, iv, stake)
    if stake is not None:
        return _stake_verdict(hp, axis, iv, stake, loss_tolerance)
    noisy = _slope_noise(rule, hp, axis, iv, tolerance)
    if noisy:
        return noisy
    if -tolerance <= lo and hi <= tolerance:
        return Verdict("stable", f"{hp}: slope b = {_fmt(b)} with 95 % interval {iv} inside "
                       f"±{tolerance:g}: {axis}-independent as {scheme} predicts", "")
    return Verdict("noisy", f"{hp}: slope interval {iv} straddles ±{tolerance:g}: cannot tell "
                   "stable from drifting", f"more seeds per configuration or another {axis}")


def _slope_noise(rule: TransferRule, hp: str, axis: str, iv: str, tolerance: float
                 ) -> Verdict | None:
    """``noisy`` when the slope interval is undefined or wider than 4·tolerance, or the optima
    scatter about the line by more than :data:`MAX_RESIDUAL`; None otherwise."""
    lo, hi = rule.slope_interval if axis == "width" else rule.intervals[axis]
    width = hi - lo if math.isfinite(lo) and math.isfinite(hi) else math.inf
    if width <= 4 * tolerance and not rule.residual_scale > MAX_RESIDUAL:
        return None
    return Verdict("noisy",
                   f"{hp}: slope interval {iv} (width {width:.3g} vs 4×tolerance = "
                   f"{4 * tolerance:.3g}), residual scale {rule.residual_scale:.3g} "
                   f"(max {MAX_RESIDUAL:.3g}) in log units",
                   f"more samples per sweep or more seeds per configuration, or more {axis}s")


def _stake_verdict(hp: str, axis: str, iv: str, stake: LossAtStake,
                   loss_tolerance: float) -> Verdict:
    """μP, the slope's interval containing 0: judged on the loss the uncertainty puts at stake."""
    said = f"{hp}: slope interval {iv} contains 0; its uncertainty costs at most " \
        f"{stake.describe()}"
    if stake.relative <= loss_tolerance:
        return Verdict("stable", f"{said}, within loss_tolerance {100 * loss_tolerance:g} %", "")
    return Verdict("noisy", f"{said}, over loss_tolerance {100 * loss_tolerance:g} %",
                   f"more seeds per configuration, a fuller design at the widest proxy, or "
                   f"another {axis}")
