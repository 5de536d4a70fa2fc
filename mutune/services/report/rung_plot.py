"""The rung plot written with every sweep: per proxy width and rung, how many trials reached
the rung, how many went on (continued or promoted), how many ended there (stopped, diverged, or
completed: they reached max_t), and the rung's cutoff — all from the recorded scheduler events
(docs/architecture.md §4, §7).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from mutune.services.report.plots import save_figure

__all__ = ["rung_summary", "plot_rungs"]


def rung_summary(rows: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """Per proxy width, one entry per rung milestone (steps), lowest first.

    Args:
        rows: :meth:`Store.sweep_rows` of a sweep.
    Returns:
        {width: [{"milestone", "reached", "went_on", "stopped", "diverged", "completed",
        "paused", "cutoff"}]} — ``went_on`` counts continue and promote decisions (one per
        trial), ``completed`` the trials that reached max_t at this rung,
        ``paused`` the trials whose last decision at the rung is still ``pause`` (0 once a
        sweep ended), ``cutoff`` the last finite cutoff recorded at the rung (None if none).
    """
    trials = {t["id"]: t for t in rows["trials"]}
    out: dict[int, list[dict[str, Any]]] = {}
    for ps in sorted(rows["proxy_sweeps"], key=lambda p: p["width"]):
        events = sorted((e for e in rows["events"]
                         if trials.get(e["trial_id"], {}).get("proxy_sweep_id") == ps["id"]),
                        key=lambda e: e["seq"])
        if not events:
            continue
        rungs: dict[int, dict[str, Any]] = {}
        for e in events:
            r = rungs.setdefault(e["milestone"], {"trials": {}, "cutoff": None})
            r["trials"][e["trial_id"]] = e["decision"]       # last decision wins
            if e["cutoff"] is not None and math.isfinite(float(e["cutoff"])):
                r["cutoff"] = float(e["cutoff"])
        entries = []
        for m in sorted(rungs):
            last = list(rungs[m]["trials"].values())
            entries.append({"milestone": m, "reached": len(last),
                            "went_on": sum(d in ("continue", "promote") for d in last),
                            "stopped": last.count("stop"), "diverged": last.count("diverged"),
                            "completed": last.count("complete"),
                            "paused": last.count("pause"), "cutoff": rungs[m]["cutoff"]})
        out[int(ps["width"])] = entries
    return out


def plot_rungs(rows: dict[str, Any], path: Path) -> Path:
    """PNG: one panel per proxy width; bars per rung (reached, went on or completed,
    stopped/diverged) on
    a log-spaced step axis, the rung's cutoff as a line on a second axis (nats)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = rung_summary(rows)
    n = max(len(summary), 1)
    fig, axes = plt.subplots(1, n, figsize=(4.6 * n, 4), squeeze=False)
    for ax, (width, entries) in zip(axes[0], summary.items()):
        x = list(range(len(entries)))
        w = 0.27
        ax.bar([i - w for i in x], [e["reached"] for e in entries], w, label="reached")
        ax.bar(x, [e["went_on"] for e in entries], w, label="continued / promoted")
        ax.bar(x, [e["completed"] for e in entries], w, bottom=[e["went_on"] for e in entries],
               label="completed here (a rung at max_t)")
        ax.bar([i + w for i in x], [e["stopped"] + e["diverged"] for e in entries], w,
               label="stopped / diverged")
        ax.set_xticks(x, [str(e["milestone"]) for e in entries])
        ax.set_xlabel("rung (training steps)")
        ax.set_ylabel("trials")
        ax.set_title(f"width {width}")
        cut = [(i, e["cutoff"]) for i, e in zip(x, entries) if e["cutoff"] is not None]
        if cut:
            ax2 = ax.twinx()
            ax2.plot(*zip(*cut), "k.-", label="cutoff")
            ax2.set_ylabel("cutoff (val loss, nats)")
        ax.legend(fontsize=7, loc="upper right")
    fig.suptitle("rungs: trials reaching each, the cutoff, how many went on")
    return save_figure(fig, Path(path))
