"""The report's plots (PNG, matplotlib's Agg backend): validation loss against learning rate
per width, and the transfer rules with the loss law. matplotlib is imported only when a plot
is drawn."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from mutune.services.report.data import live_proxy_sweeps

__all__ = ["plot_loss_vs_lr", "plot_transfer", "save_figure"]


def save_figure(fig: Any, path: Path) -> Path:
    """Lay out ``fig``, write it to ``path`` as a 110-dpi PNG (creating the folder), close it;
    returns ``path``."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _reported_at(trials: Any, proxy_sweep_id: int, step: int) -> list[tuple[float, float]]:
    """(log2 lr, validation loss) of every trial of the proxy sweep that reported at
    ``step`` with a finite loss."""
    out = []
    for t in trials:
        if t["proxy_sweep_id"] != proxy_sweep_id:
            continue
        for r in t.get("reports") or []:
            v = (r.get("metrics") or {}).get("val_loss")
            if r.get("step") == step and v is not None and math.isfinite(float(v)):
                out.append((math.log2(float(t["config"]["lr"])), float(v)))
    return out


def plot_loss_vs_lr(rows: dict[str, Any], path: Path) -> Path:
    """PNG of validation loss against log2 learning rate, one colour per width: left, at the
    first rung (every trial that reported); right, at each width's chosen rung (the one its best
    configuration was picked at). Values are the ones the scheduler judged there (scheduler
    events); at max_t after a confirmation design (not a rung) every value the width's trials
    reported there; diverged trials are left out. Log-scale loss axis."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trials = {t["id"]: t for t in rows["trials"]}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for ps in sorted(live_proxy_sweeps(rows), key=lambda p: p["width"]):
        events = [e for e in rows["events"]
                  if trials.get(e["trial_id"], {}).get("proxy_sweep_id") == ps["id"]
                  and e["value"] is not None and math.isfinite(float(e["value"]))]
        if not events:
            continue
        first = min(e["milestone"] for e in events)
        chosen = (ps.get("best") or {}).get("milestone", first)
        depth = (ps.get("settings") or {}).get("depth")
        size = f"width {ps['width']}" + (f" × depth {depth}" if depth else "")
        for ax, m in ((axes[0], first), (axes[1], chosen)):
            pts = sorted((math.log2(float(trials[e["trial_id"]]["config"]["lr"])),
                          float(e["value"])) for e in events if e["milestone"] == m)
            if not pts:
                # max_t (a confirmation design's horizon) is not a rung: no scheduler
                # event there, so the values every trial of this proxy reported at it
                pts = sorted(_reported_at(trials.values(), ps["id"], m))
            if pts:
                ax.plot(*zip(*pts), "o", ms=5, alpha=0.8, label=f"{size} (step {m})")
    for ax, title in ((axes[0], "first rung: every trial"),
                      (axes[1], "where each best was picked (a rung, or max_t)")):
        ax.set_xlabel("log2 learning rate")
        ax.set_title(title)
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("validation loss (nats)")
    return save_figure(fig, path)


def _plot_choices(ax: Any, rule: dict[str, Any], widths: list[int], names: list[str],
                  report: dict[str, Any]) -> None:
    """A categorical knob's panel: the name each width chose (matplotlib's categorical axis)
    and the target's, no line (a choice is compared per width, never fitted)."""
    ax.plot(widths, names, "o", label="choice per width")
    tv = rule.get("transferred_value")
    if tv is not None:
        tw = report["target"]["width"] if report.get("target") else max(widths) * 4
        ax.plot([tw], [tv], "*", ms=10, label="transferred (the widest's)")
    ax.set_xscale("log", base=2)
    at_least_two_octaves(ax)
    ax.set_xlabel("width")
    ax.set_title(f"{rule['hyperparameter']}: {rule.get('verdict', '')}")
    ax.legend(fontsize=7)


def plot_transfer(report: dict[str, Any], path: Path) -> Path:
    """PNG: left, each rule's per-width optima with their 95 % intervals, the fitted line and
    the transferred value at the target width (with its interval); right, the loss law over
    the proxies with the target's predicted interval and its actual loss."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rules = report["rules"]
    fig, axes = plt.subplots(1, len(rules) + 1, figsize=(5 * (len(rules) + 1), 4.2))
    for ax, rule in zip(axes, rules):
        w = rule.get("widths") or []
        y = rule.get("optima") or []
        if any(isinstance(v, str) for v in y):       # a categorical knob: names per width
            _plot_choices(ax, rule, w, y, report)
            continue
        ivs = rule.get("optima_intervals")
        if ivs and all(v is not None for iv in ivs for v in iv):
            # a weighted-mean optimum can sit outside its percentile interval: clamp at 0
            err = [[max(yy - lo, 0) for yy, (lo, _) in zip(y, ivs)],
                   [max(hi - yy, 0) for yy, (_, hi) in zip(y, ivs)]]
            ax.errorbar(w, y, yerr=err, fmt="o", capsize=3, label="optimum per width")
        else:
            ax.plot(w, y, "o", label="optimum per width")
        tw = report["target"]["width"] if report.get("target") else max(w) * 4
        xs = np.geomspace(min(w), tw, 50)
        if rule.get("slope") is not None and rule.get("depths"):
            # a depth ladder: the fitted law at each proxy depth and at the target's
            c = rule["slopes"]["depth"]
            for dp in sorted({*rule["depths"], rule.get("target_depth") or 0} - {0}):
                ax.plot(xs, np.exp(rule["intercept"] + rule["slope"] * np.log(xs)
                                   + c * math.log(dp)), "-", lw=1,
                        label=f"fitted at depth {dp} (b = {rule['slope']:.3g}, c = {c:.3g})")
        elif rule.get("slope") is not None:         # choices and regularisers are not fitted
            ax.plot(xs, np.exp(rule["intercept"] + rule["slope"] * np.log(xs)), "-", lw=1,
                    label=f"fitted rule, b = {rule['slope']:.3g}")
        tv = rule.get("transferred_value")
        if tv is not None and str(rule.get("transfer_form", "")).startswith(
                ("flat", "not transferred", "per choice")):
            ax.plot([max(w), tw], [tv, tv], "--", lw=1, label="transferred flat (μP)")
        tiv = rule.get("transferred_interval")
        if tv is not None:
            yerr = None
            if tiv and all(v is not None for v in tiv):
                yerr = [[max(tv - tiv[0], 0)], [max(tiv[1] - tv, 0)]]
            ax.errorbar([tw], [tv], yerr=yerr, fmt="*", ms=10, capsize=3, label="transferred")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        at_least_two_octaves(ax)
        ax.set_xlabel("width")
        ax.set_title(f"{rule['hyperparameter']}: {rule.get('verdict', '')}")
        ax.legend(fontsize=7)
    ax = axes[-1]
    law = report.get("loss_law") or {}
    if law.get("n_params"):
        ax.plot(law["n_params"], law["losses"], "o", label="best loss per proxy")
        tg = report.get("target") or {}
        if tg.get("predicted_val_loss") is not None and all(
                v is not None for v in tg["predicted_val_loss_interval"]):
            lo, hi = tg["predicted_val_loss_interval"]
            ax.errorbar([law["target_params"]], [tg["predicted_val_loss"]],
                        yerr=[[max(tg["predicted_val_loss"] - lo, 0)],
                              [max(hi - tg["predicted_val_loss"], 0)]],
                        fmt="s", capsize=3, label="predicted (target)")
        if tg.get("val_loss") is not None:
            ax.plot([law["target_params"]], [tg["val_loss"]], "*", ms=12, label="actual")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("parameters N")
        ax.set_ylabel("validation loss (nats)")
        ax.set_title("loss law: predicted vs actual target loss")
        ax.legend(fontsize=7)
    return save_figure(fig, path)


def at_least_two_octaves(ax: Any) -> None:
    """Widen a log y-axis to span at least two octaves around its centre, so identical
    optima (a fallback, a flat rule) are not stretched over floating-point noise."""
    lo, hi = ax.get_ylim()
    if not (lo > 0 and hi > 0):
        return
    mid = math.sqrt(lo * hi)
    if hi / lo < 4.0:
        ax.set_ylim(mid / 2.0, mid * 2.0)
