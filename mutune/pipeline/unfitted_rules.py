"""Rule rows for searched knobs that get no fitted power law (docs/transfer.md §8): a
``choice`` dimension, compared per width, and a regulariser (weight decay, dropout), which
Tensor Programs V (Table 1) does not transfer across width."""
from __future__ import annotations

import math
from typing import Any

from mutune.config import Choice
from mutune.config.spaces import clip_valid, fmt_value, is_categorical
from mutune.pipeline.fitted_rule import size_label
from mutune.pipeline.optimum_record import WidthOptimum

__all__ = ["unfitted_rule"]


def _snap(dist: Any, value: float) -> float:
    """``value`` moved to the nearest listed value (in log space when all are positive)."""
    vals = [float(v) for v in dist.values]
    if all(v > 0 for v in vals) and value > 0:
        return min(vals, key=lambda v: abs(math.log(v) - math.log(value)))
    return min(vals, key=lambda v: abs(v - value))


def unfitted_rule(name: str, dist: Any, widths: list[int], optima: list[WidthOptimum],
                  target_w: int, depths: list[int] | None = None) -> dict[str, Any]:
    """The rule row of a knob with no fitted power law: the target takes the widest proxy's
    optimum."""
    per_choice = isinstance(dist, Choice)
    if is_categorical(dist):
        values = [o.optimum[name] for o in optima]
    else:
        values = [float(o.optimum[name]) for o in optima]
        if per_choice:
            values = [_snap(dist, v) for v in values]
        values = [clip_valid(name, v) for v in values]
    ivs = [o.interval.get(name) for o in optima]
    value = values[-1]
    by_width = ", ".join(f"{size_label(w, d)}: {fmt_value(v)}"
                         for w, d, v in zip(widths, depths or [None] * len(widths), values))
    if per_choice:
        agree = len(set(values)) == 1
        reason = (f"{name}: a choice, compared per width, not fitted ({by_width}); "
                  + ("every width chose the same value" if agree else
                     "the widths chose differently"))
        advice = None if agree else (f"the best {name} changes with width: the target takes "
                                     "the widest proxy's; check it at the target size")
        form = "per choice: the widest proxy's choice"
        interval = None if is_categorical(dist) else [value, value]
    else:
        reason = (f"{name}: regularisation is not transferred across width (Tensor Programs V, "
                  f"Table 1); no rule is fitted ({by_width})")
        advice = None
        form = "not transferred: the widest proxy's optimum"
        interval = list(ivs[-1]) if ivs[-1] is not None else [math.nan, math.nan]
    return {"hyperparameter": name, "intercept": None, "slope": None,
            "slope_interval": None, "residual_scale": None, "widths": widths,
            "optima": values, "optima_intervals": None if per_choice or any(
                iv is None for iv in ivs) else [list(iv) for iv in ivs],
            "optimum_source": "per width, as for every searched hyperparameter",
            "optimum_rungs": [o.milestone for o in optima],
            "optimum_horizons": [o.optimum_horizon for o in optima],
            "optimum_trials": [o.n_trials for o in optima],
            "optimum_seeds": [o.n_seeds for o in optima],
            "optimum_methods": [o.method for o in optima],
            # a choice has no range to widen: only a regulariser's edge reaches the gate
            "edge_widths": [] if per_choice else [w for w, o in zip(widths, optima)
                                                  if o.on_edge.get(name)],
            "target_width": target_w, "transferred_value": value,
            "transferred_interval": interval, "formula": None, "transfer_form": form,
            "choice_evidence": ([o.choices.get(name) for o in optima]
                                if is_categorical(dist) else None),
            "verdict": "per_choice" if per_choice else "not_transferred",
            "reason": reason, "advice": advice, "outside_searched_range": False,
            **_axes(per_choice, depths)}


def _axes(per_choice: bool, depths: list[int] | None) -> dict[str, Any]:
    axes = ["width", "depth"] if depths else ["width"]
    verdict = "per_choice" if per_choice else "not_transferred"
    out: dict[str, Any] = {"axes": axes, "slopes": {a: None for a in axes},
                           "slope_intervals": {a: None for a in axes},
                           "verdicts": {a: verdict for a in axes}}
    if depths:
        out["depths"] = list(depths)
    return out
