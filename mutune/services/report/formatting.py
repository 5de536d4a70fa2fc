"""Formatting shared by the terminal tables: numbers (``—`` for what is missing), and tables
that wrap a cell on a narrow terminal instead of cutting it with "…"."""
from __future__ import annotations

import math
from typing import Any

from mutune.scaling.stake import share_percent as fmt_share  # noqa: F401 (re-exported)

__all__ = ["fmt_num", "fmt_interval", "choice_line", "unclipped"]


def fmt_num(v: Any, fmt: str = ".4g") -> str:
    """``v`` formatted with ``fmt`` (a :func:`format` spec); ``"—"`` for None; a name (a
    categorical knob's value) as it is."""
    return "—" if v is None else v if isinstance(v, str) else format(v, fmt)


def fmt_interval(iv: Any) -> str:
    """``[lo, hi]`` at 4 significant digits; ``"—"`` when missing or not finite."""
    if not iv or any(v is None or isinstance(v, str) or not math.isfinite(float(v))
                     for v in iv):
        return "—"
    return f"[{float(iv[0]):.4g}, {float(iv[1]):.4g}]"


def unclipped(table: Any) -> Any:
    """``table`` (a rich Table) with every column folding its cells onto more lines when the
    terminal is too narrow, so no name and no number is ever cut short; returns it."""
    for column in table.columns:
        column.overflow = "fold"
    return table


def choice_line(evidence: dict[str, Any]) -> str:
    """One width's evidence for a categorical knob's choice
    (:func:`mutune.pipeline.choice_optimum.best_choice`) as text: the method and trials, then
    per name its effect against the chosen name with the 95 % interval and the share of
    bootstrap replicates it won — e.g. ``fixed-effects quadratic over 24 trials: cosine
    chosen (p_best 0.97, 8 trials); wsd +0.21 [0.15, 0.27] (p_best 0.03, 8 trials)`` — or,
    under the top-k fallback, the mean of each name's best trials and their sd."""
    parts = []
    for name, e in evidence["per_name"].items():
        n = f"{e['n_trials']} trials"
        if not e["n_trials"]:
            parts.append(f"{name} no finite trial")
        elif evidence["method"] != "top-k mean":
            eff = e.get("effect")
            unit = f" {evidence['metric']}" if evidence.get("metric") else ""
            head = (f"{name} chosen" if eff == 0
                    else f"{name} {eff:+.3g}{unit} {fmt_interval(e.get('effect_interval'))}")
            pb = e.get("p_best")
            parts.append(f"{head} ({'' if pb is None else f'p_best {pb:.2f}, '}{n})")
        else:
            sd = f", sd {e['spread']:.2g}" if e.get("spread") is not None else ""
            parts.append(f"{name} {fmt_num(e['score'])} "
                         f"(mean of its best {e['top_k']} of {n}{sd})")
    at = f" at rung {evidence['milestone']}" if evidence.get("milestone") else ""
    line = f"{evidence['method']} over {evidence['n_trials']} trials{at}: " + "; ".join(parts)
    if evidence.get("late_rung"):
        line += (f" — but the best trial at rung {evidence['late_rung']} used "
                 f"{evidence['late_best']}: a schedule's effect shows late in a run; check "
                 "the choice at full length")
    return line
