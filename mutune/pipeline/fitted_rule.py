"""One searched hyperparameter's fitted transfer rule log h* = a + b·log w (+ c·log L,
docs/transfer.md §10) as a recorder row, with its verdict along every axis. A μP-flat axis
(Yang et al. 2022, TP V §3; Dey et al. 2025, arXiv 2505.01618, §3) is extrapolated only
when its verdict is ``drifting``; where every axis is flat, the target's optimum is placed by
pooling every size's optimum (:mod:`mutune.scaling.pooled`)."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from mutune.config import LogUniform, SweepConfig
from mutune.config.spaces import clip_valid
from mutune.pipeline.optimum_record import WidthOptimum

__all__ = ["fitted_rule", "size_label"]


def size_label(width: int, depth: int | None) -> str:
    """``width 64`` or, on a depth ladder, ``width 64 × depth 4``."""
    return f"width {width}" if depth is None else f"width {width} × depth {depth}"


def _depth_scheme(config: SweepConfig) -> str:
    """``mup`` when the model scales its residual branches with depth, else ``sp``."""
    kind = getattr(config.model, "depth_parametrization", "none")
    return "sp" if kind == "none" else "mup"


def fitted_rule(config: SweepConfig, name: str, dist: Any, widths: list[int],
                optima: list[WidthOptimum], depths: list[int] | None = None
                ) -> dict[str, Any]:
    """The rule row of a continuous searched hyperparameter (``widths``, ``depths`` shape (n,)).

    Raises:
        FitError: fewer than 2 widths, non-positive optima, or sizes that cannot separate width
            from depth."""
    from mutune.scaling import fit_transfer_rule

    tr = config.transfer
    target_w = config.target.width
    target_d = config.target_depth if depths else None
    use_horizon = (name == "lr" and tr.horizon == "extrapolate"
                   and all((o.horizon or {}).get("extrapolated_lr") for o in optima))
    values = [o.horizon["extrapolated_lr"] if use_horizon and o.horizon else o.optimum[name]
              for o in optima]
    ivs = [o.interval[name] for o in optima]
    intervals = None if use_horizon or any(iv is None for iv in ivs) else ivs
    extra = {"depth": [float(d) for d in depths]} if depths else None
    rule = fit_transfer_rule(name, widths, values, extra_scales=extra,
                             optima_intervals=intervals, n_boot=tr.n_boot, seed=config.seed)
    rule.check_target({"width": target_w, **({"depth": target_d} if depths else {})})
    labels = [size_label(w, d) for w, d in zip(widths, depths or [None] * len(widths))]
    verdicts, schemes = _verdicts(config, rule, name, optima, labels, depths, None)
    # a μP-flat axis is extrapolated only when its verdict resolves a drift: extrapolating an
    # unresolved slope over octaves is how a transfer diverges
    flat = {a: schemes[a] == "mup" and tr.mup_flat and v.name != "drifting"
            for a, v in verdicts.items()}
    value, lo, hi = _transferred(name, rule, values, intervals, flat, widths, depths,
                                 target_w, target_d)
    pooled = _pooled(values, intervals) if all(flat.values()) else None
    if pooled is not None:
        lo, hi = clip_valid(name, pooled.interval[0]), clip_valid(name, pooled.interval[1])
    stake = _stake(config, rule, name, optima, labels, value, (lo, hi), pooled is not None)
    if stake is not None:   # judged again on the loss at stake (drifting or not is unchanged)
        verdicts, _ = _verdicts(config, rule, name, optima, labels, depths, stake)
    verdict = verdicts["width"]
    row = {
        "hyperparameter": name, "intercept": rule.intercept, "slope": rule.slope,
        "slope_interval": list(rule.slope_interval), "residual_scale": rule.residual_scale,
        "axes": list(rule.axes),
        "slopes": {a: (rule.slope if a == "width" else rule.coefficients[a]) for a in rule.axes},
        "slope_intervals": {a: list(rule.slope_interval if a == "width" else rule.intervals[a])
                            for a in rule.axes},
        "verdicts": {a: v.name for a, v in verdicts.items()},
        "widths": widths, "optima": values, "optima_intervals": intervals,
        "optimum_source": _optimum_source(use_horizon, optima),
        "optimum_rungs": [o.milestone for o in optima],
        "optimum_horizons": [o.optimum_horizon for o in optima],
        "optimum_trials": [o.n_trials for o in optima],
        "optimum_seeds": [o.n_seeds for o in optima],
        "optimum_methods": [o.method for o in optima],
        "edge_widths": [w for w, o in zip(widths, optima) if o.on_edge.get(name)],
        "target_width": target_w, "transferred_value": value,
        "transferred_interval": [lo, hi], "formula": rule.formula,
        "pooled_optimum": None if pooled is None else dataclasses.asdict(pooled),
        "transfer_form": _transfer_form(verdicts, flat, depths),
        "verdict": verdict.name, "reason": verdict.reason, "advice": verdict.advice,
        "loss_at_stake": None if stake is None else dataclasses.asdict(stake),
        "loss_tolerance": tr.loss_tolerance,
        "outside_searched_range": (isinstance(dist, LogUniform)
                                   and not dist.low <= value <= dist.high)}
    if depths:
        row.update(depths=list(depths), target_depth=target_d,
                   edge_depths=[d for d, o in zip(depths, optima) if o.on_edge.get(name)],
                   verdict_reasons={a: v.reason for a, v in verdicts.items()},
                   verdict_advice={a: v.advice for a, v in verdicts.items()})
    if use_horizon:
        _add_horizon_axis(config, row, widths, depths, optima)
    return row


def _verdicts(config: SweepConfig, rule: Any, name: str, optima: list[WidthOptimum],
              labels: list[str], depths: list[int] | None, stake: Any
              ) -> tuple[dict[str, Any], dict[str, str]]:
    """The rule's verdict along each axis, and each axis's parametrization scheme."""
    from mutune.scaling import rule_verdict

    tr, par = config.transfer, config.model.parametrization
    edges = [o.edge_side.get(name) or "unknown" for o in optima if o.on_edge.get(name)]
    fallbacks = [f"{lab}: {o.fallback_reason}" for lab, o in zip(labels, optima)
                 if o.method == "best-trial"]
    common = dict(tolerance=tr.tolerance, edge=edges[0] if edges else None,
                  fallback="; ".join(fallbacks) if fallbacks else None, stake=stake,
                  loss_tolerance=tr.loss_tolerance)
    verdicts = {"width": rule_verdict(rule, parametrization=par, **common)}
    schemes = {"width": par}
    if depths:
        schemes["depth"] = _depth_scheme(config)
        verdicts["depth"] = rule_verdict(rule, parametrization=schemes["depth"], axis="depth",
                                         **common)
    return verdicts, schemes


def _surface(name: str, optima: list[WidthOptimum], labels: list[str]
             ) -> tuple[float, float, str] | None:
    """(curvature, loss, source) of the widest proxy's fitted loss surface along ``name``: the
    widest with a full-horizon design first (its surface is at the target's horizon), else the
    widest fitted at a rung; None where no proxy has one."""
    fitted = []
    for i in reversed(range(len(optima))):
        c, loss = (optima[i].curvature or {}).get(name), optima[i].fitted_loss
        if c is not None and c > 0 and loss is not None and loss > 0:
            fitted.append((optima[i].optimum_horizon != "max_t", i, c, loss))
    if not fitted:
        return None
    at_rung, i, c, loss = min(fitted, key=lambda f: (f[0], -f[1]))
    if at_rung:
        why = f"fitted at {optima[i].optimum_horizon}: no proxy has a full-horizon design"
    elif i == len(optima) - 1:
        why = "the widest proxy, fitted on its full-horizon design"
    elif any(f[1] > i for f in fitted):
        why = "the widest with a full-horizon design (the wider proxies' surfaces are at a rung)"
    else:
        why = f"the widest with a full-horizon design; {labels[-1]} has no fitted surface"
    return c, loss, f"{labels[i]}'s loss surface, {why}"


def _pooled(values: list[float], intervals: list[Any] | None) -> Any:
    """The optima pooled under μP (:func:`mutune.scaling.pooled.pool_optima`); None without
    every optimum's interval or where one cannot be pooled (an optimum outside its interval, an
    interval of zero width): the rule's own interval then stands."""
    from mutune.scaling.pooled import pool_optima

    if not intervals:
        return None
    try:
        return pool_optima(values, [tuple(iv) for iv in intervals])
    except ValueError:
        return None


def _stake(config: SweepConfig, rule: Any, name: str, optima: list[WidthOptimum],
           labels: list[str], value: float, interval: tuple[float, float],
           pooled: bool = False) -> Any:
    """The loss at stake at the target (:func:`mutune.scaling.stake.loss_at_stake`): the miss
    from ``value`` to the farthest end of the interval the target's optimum may lie in — the
    pooled optima's predictive interval where the rule transfers flat (``pooled``), else its
    own interval or the rule's prediction interval at the target, whichever reaches farther;
    None for a score metric, or without a fitted surface or a finite interval."""
    from mutune.scaling.stake import loss_at_stake

    if config.search.mode != "min":
        return None
    surface = _surface(name, optima, labels)
    at = {"depth": config.target_depth} if "depth" in rule.axes else {}
    extrapolated = () if pooled else rule.prediction_interval(config.target.width, **at)
    ends = [x for x in (*interval, *extrapolated) if math.isfinite(x) and x > 0]
    if surface is None or not ends or not (math.isfinite(value) and value > 0):
        return None
    c, loss, source = surface
    return loss_at_stake(name, value, (min(ends + [value]), max(ends + [value])),
                         curvature=c, loss=loss, source=source)


def _transferred(name: str, rule: Any, values: list[float], intervals: list[Any] | None,
                 flat: dict[str, bool], widths: list[int], depths: list[int] | None,
                 target_w: int, target_d: int | None) -> tuple[float, float, float]:
    """The target's value and interval: the largest proxy's when every axis is flat, else the
    rule's prediction; clipped to the knob's valid range."""
    if all(flat.values()):
        value = values[-1]
        lo, hi = intervals[-1] if intervals else (math.nan, math.nan)
    else:
        at_w = max(widths) if flat["width"] else target_w
        at = {"depth": max(depths) if flat["depth"] else target_d} if depths else {}
        value = rule.predict(at_w, **at)
        lo, hi = rule.prediction_interval(at_w, **at)
    if clip_valid(name, value) != value:
        value = clip_valid(name, value)
        lo, hi = clip_valid(name, lo), clip_valid(name, hi)
    return value, lo, hi


def _transfer_form(verdicts: dict[str, Any], flat: dict[str, bool],
                   depths: list[int] | None) -> str:
    if all(flat.values()):
        largest = "widest" if not depths else "widest, deepest"
        return (f"flat: the {largest} proxy's optimum — under μP a slope is extrapolated only "
                f"when the verdict is drifting, and this rule's is "
                + ", ".join(f"{v.name}" + (f" along {a}" if depths else "")
                            for a, v in verdicts.items())
                + "; the target's interval pools every size's optimum")
    if not depths:
        return "power law in width"
    return "power law in " + " and ".join(a for a in verdicts if not flat[a]) + "".join(
        f"; flat in {a} (its verdict is {verdicts[a].name})" for a in verdicts if flat[a])


def _optimum_source(use_horizon: bool, optima: list[WidthOptimum]) -> str:
    return ("horizon-extrapolated" if use_horizon else
            "per width: a local quadratic on the values at max_t (the "
            "sweep's completed trials and the confirmation design)"
            if all(o.optimum_horizon == "max_t" for o in optima)
            else "per width: at max_t on the designed widths; at the others the common rung's "
                 "optimum moved to max_t by a designed width's shift"
            if any(o.optimum_horizon == "max_t" for o in optima)
            and all(o.optimum_horizon == "max_t" or "moved to max_t" in o.optimum_horizon
                    for o in optima)
            else "per width: the highest rung holding enough trials for "
                 "the fit at every width, else at that width")


def _add_horizon_axis(config: SweepConfig, row: dict[str, Any], widths: list[int],
                      depths: list[int] | None, optima: list[WidthOptimum]) -> None:
    """The horizon as one more axis of the lr rule: log lr* = … + d·log T, fitted jointly on the
    per-rung optima, d judged as a correction (Bjorck et al. 2025, ICLR, §3)."""
    from mutune.errors import FitError
    from mutune.scaling import fit_transfer_rule, rule_verdict

    ws, ds, ts, lrs = [], [], [], []
    for i, o in enumerate(optima):
        h = o.horizon or {}
        for t, lr in zip(h.get("rungs") or [], h.get("optimum_lr_per_rung") or []):
            ws.append(widths[i])
            ds.append(float(depths[i]) if depths else 1.0)
            ts.append(float(t))
            lrs.append(float(lr))
    extra = {"steps": ts, **({"depth": ds} if depths else {})}
    target = {"width": config.target.width, "steps": config.target_steps,
              **({"depth": config.target_depth} if depths else {})}
    try:
        joint = fit_transfer_rule("lr", ws, lrs, extra_scales=extra,
                                  n_boot=config.transfer.n_boot, seed=config.seed)
        joint.check_target(target)
    except (FitError, ValueError) as err:
        row["horizon_error"] = str(err)
        return
    verdict = rule_verdict(joint, parametrization="sp", axis="steps",
                           tolerance=config.transfer.tolerance)
    row["axes"].append("steps")
    row["slopes"]["steps"] = joint.coefficients["steps"]
    row["slope_intervals"]["steps"] = list(joint.intervals["steps"])
    row["verdicts"]["steps"] = verdict.name
    row.setdefault("verdict_reasons", {})["steps"] = verdict.reason
    at = {k: v for k, v in target.items() if k != "width"}
    row["horizon_prediction"] = {"formula": joint.formula, "value": joint.predict(
        config.target.width, **at), "interval": list(joint.prediction_interval(
            config.target.width, **at)), "points": len(lrs)}
