"""A width without a confirmation design: its sweep's optimum at the common rung, moved to
``max_t`` by the shift a designed width measured between that rung and ``max_t``
(docs/transfer.md §2).

Short rungs favour large learning rates (Wu et al. 2018, ICLR, §3–4); under μP the training
dynamics, and so this horizon bias, do not depend on width to leading order (Yang et al. 2021,
"Tensor Programs V", §3 and Fig. 1), so one narrow width's design measures it for every width:

    log h*(w, max_t) = log h*(w, m) + [log h*(a, max_t) − log h*(a, m)]

with ``a`` the widest designed width at ``w``'s depth and ``m`` the highest rung both sweeps
hold enough trials at. The 95 % interval adds the three log-unit half-widths in quadrature on
each side (the three fits use different trials)."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from mutune.config import SweepConfig
from mutune.errors import FitError, SearchError
from mutune.pipeline.optimum_record import WidthOptimum
from mutune.pipeline.sweep import ProxyResult

__all__ = ["rung_optimum", "shifted_optimum", "max_t_best"]


def rung_optimum(config: SweepConfig, outcome: Any, milestone: int) -> tuple[WidthOptimum, int]:
    """(the width's optimum re-estimated at rung ``milestone``, trials at the best's rung).

    Raises:
        SearchError: no rung holds a finite value."""
    from mutune.pipeline.proxy_best import trial_curves
    from mutune.pipeline.transfer_stage import width_optimum
    from mutune.search.best import best_at_rung

    search = config.search
    best = best_at_rung(outcome.core.rung_values(), mode=search.mode, min_trials=3,
                        scope=search.best_scope, curves=trial_curves(outcome.trials,
                                                                     search.metric))
    return width_optimum(config, outcome, best, milestone=milestone), best.n_trials


def _at(config: SweepConfig, opt: WidthOptimum | None, outcome: Any, m: int) -> WidthOptimum:
    if opt is not None and opt.milestone == m and opt.optimum_horizon != "max_t":
        return opt
    return rung_optimum(config, outcome, m)[0]


def _half_widths(value: float, interval: list[float] | None) -> tuple[float, float] | None:
    """(below, above) the value in log units; None without a finite positive interval."""
    if interval is None or not all(math.isfinite(x) and x > 0 for x in (value, *interval)):
        return None
    lo, hi = interval
    return max(math.log(value / lo), 0.0), max(math.log(hi / value), 0.0)


def _moved(name: str, own: WidthOptimum, full: WidthOptimum, rung: WidthOptimum
           ) -> tuple[float, list[float] | None, float]:
    """(moved value, its interval, shift in octaves) of one continuous knob."""
    from mutune.config.spaces import clip_valid

    v, f, r = (float(o.optimum[name]) for o in (own, full, rung))
    shift = math.log(f / r)
    value = clip_valid(name, v * math.exp(shift))
    parts = [_half_widths(v, own.interval.get(name)), _half_widths(f, full.interval.get(name)),
             _half_widths(r, rung.interval.get(name))]
    if any(p is None for p in parts):
        return value, None, shift / math.log(2)
    (ol, oh), (fl, fh), (rl, rh) = parts  # type: ignore[misc]
    below, above = math.hypot(ol, fl, rh), math.hypot(oh, fh, rl)
    return value, [value * math.exp(-below), value * math.exp(above)], shift / math.log(2)


def shifted_optimum(config: SweepConfig, own: ProxyResult, outcome: Any,
                    anchor: ProxyResult, anchor_screened: ProxyResult, anchor_outcome: Any,
                    anchor_label: str) -> WidthOptimum:
    """``own``'s optimum moved to ``max_t`` by ``anchor``'s measured shift.

    ``anchor``: the designed width refitted at ``max_t``; ``anchor_screened``: the same width
    before its refit (its sweep's optimum). A shift that cannot be measured (the anchor's refit
    failed, no common rung) leaves ``own``'s rung optimum, with the reason in
    ``horizon_shift``."""
    from mutune.pipeline.confirm_stage import design_names
    from mutune.pipeline.transfer_stage import common_rung

    base = own.optimum
    if base is None:
        raise FitError(f"{own.size}: no optimum was estimated for this proxy")
    full = anchor.optimum
    m = common_rung(config, [outcome, anchor_outcome])
    why = ("no rung holds enough trials at both widths" if m is None else
           f"{anchor_label}'s full-horizon refit failed" if full is None
           or full.optimum_horizon != "max_t" else None)
    if why is not None:
        return dataclasses.replace(base, horizon_shift={"from": anchor_label, "error": why})
    try:
        mine, rung = _at(config, base, outcome, m), _at(config, anchor_screened.optimum,
                                                        anchor_outcome, m)
    except (SearchError, FitError) as err:
        return dataclasses.replace(base, horizon_shift={"from": anchor_label,
                                                        "error": str(err)})
    names = [n for n in design_names(config)
             if all(n in o.optimum for o in (mine, full, rung))]
    moved = {n: _moved(n, mine, full, rung) for n in names}
    return dataclasses.replace(
        mine, optimum={**mine.optimum, **{n: v for n, (v, _, _) in moved.items()}},
        interval={**mine.interval, **{n: iv for n, (_, iv, _) in moved.items()}},
        optimum_horizon=f"rung {m} of max_t {config.search.scheduler.max_t}, moved to max_t "
                        f"by {anchor_label}'s shift",
        horizon_shift={"from": anchor_label, "rung": m,
                       "octaves": {n: s for n, (_, _, s) in moved.items()},
                       "anchor_at_max_t": {n: float(full.optimum[n]) for n in names},
                       "anchor_at_rung": {n: float(rung.optimum[n]) for n in names},
                       "at_rung": {n: float(mine.optimum[n]) for n in names}})


def max_t_best(config: SweepConfig, outcome: Any) -> dict[str, Any] | None:
    """The configuration with the best seed-mean value at ``max_t`` among ``outcome``'s trials
    (ASHA's completed ones): its figures, as :class:`ProxyResult` names them; None when no
    trial reached ``max_t``."""
    from mutune.pipeline.full_horizon import full_horizon_trials

    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in full_horizon_trials(config, [outcome]):
        groups.setdefault(tuple(sorted(r["hparams"].items())), []).append(r)
    if not groups:
        return None
    sign = 1.0 if config.search.mode == "min" else -1.0
    rows = min(groups.values(), key=lambda g: sign * sum(r["value"] for r in g) / len(g))
    return {"best_val_loss": sum(r["value"] for r in rows) / len(rows),
            "best_config": dict(rows[0]["hparams"]), "best_trial_id": rows[0]["trial_id"],
            "milestone": config.search.scheduler.max_t}
