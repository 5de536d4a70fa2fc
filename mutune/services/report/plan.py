"""``mutune run --dry-run``'s plan as terminal tables (the plan itself is
:func:`mutune.pipeline.dry_run.plan_sweep`)."""
from __future__ import annotations

from typing import Any

from mutune.services.report.formatting import unclipped

__all__ = ["render_plan"]


def render_plan(plan: dict[str, Any], console: Any) -> None:
    """Print ``plan`` (:func:`mutune.pipeline.dry_run.plan_sweep`) as rich tables."""
    from rich.table import Table

    ladder = any(w.get("depth") for w in plan["widths"])
    per = "proxy (width × depth)" if ladder else "width"
    console.print(f"[bold]dry run of {plan['name']}[/]: nothing was trained or recorded. "
                  f"Warm-up: {plan['warmup']['steps']} steps + 1 evaluation per {per}, "
                  f"{plan['warmup']['seconds']:.1f} s in all"
                  + _timed_on(plan.get("timed_on")) + ".", highlight=False)
    t = Table(title=f"Plan ({plan['scheduler']}; device kind {plan['device_kind']}, "
                    f"{plan['devices_per_trial']:g} per trial)")
    for col in ("width × depth" if ladder else "width", "trials", "steps", "evals", "s/step",
                "s/eval", "build s", "confirm trials", "GPU-hours (sweep + design)"):
        t.add_column(col, justify="right")
    for w in [*plan["widths"], plan["target"]]:
        label = (("target " if w is plan["target"] else "") + str(w["width"])
                 + (f" × {w['depth']}" if w.get("depth") else ""))
        t.add_row(label, str(w["trials"]), str(w["steps"]), str(w["evals"]),
                  f"{w['s_per_step']:.4g}", f"{w['s_per_eval']:.4g}", f"{w['setup_s']:.3g}",
                  str(w.get("confirm_trials", "—")), f"{w['gpu_hours']:.6f}")
    console.print(unclipped(t))
    tg = plan["target"]
    if tg.get("workers", 1) > 1:
        console.print(f"target on {tg['workers']} data-parallel workers: timed on one "
                      f"worker's batch of {tg['batch_per_worker']}, billed "
                      f"{tg['workers']} × {plan['devices_per_trial']:g} devices; the gradient "
                      "all-reduce is not timed, so this is a lower estimate", highlight=False)
    if tg.get("index_limit_warning"):
        console.print(f"[bold red]warning[/]: the target run: {tg['index_limit_warning']}",
                      highlight=False)
    if tg.get("timing") == "extrapolated":
        console.print(f"target ({tg['n_params']:,} parameters) not built: its times are "
                      f"extrapolated from its FLOPs at the widest proxy's achieved FLOP/s "
                      f"({tg['formula']}); small models use a device less well, so this "
                      "is an upper estimate", highlight=False)
    c = Table(title="Estimated cost" + (f" at {plan['price_per_hour']:g} per device-hour"
                                        if plan["price_per_hour"] else ""))
    c.add_column("line")
    c.add_column("GPU-hours", justify="right")
    if plan["money"]:
        c.add_column("money", justify="right")
    for key, label in (("proxy_gpu_hours", "proxy sweeps + confirmation designs"),
                       ("target_gpu_hours", "target run"),
                       ("total_gpu_hours", "total (mutune)"),
                       ("gate_gpu_hours_max", "gate rounds, at most"),
                       ("total_gpu_hours_max", "total with every gate round"),
                       ("naive_gpu_hours", "naive: same search at target size"),
                       ("naive_grid_gpu_hours", "naive: every sample to max_t")):
        if key not in plan:
            continue
        row = [label, f"{plan[key]:.6f}"]
        if plan["money"]:
            money = plan["money"].get(key.replace("gpu_hours", "money"))
            row.append("—" if money is None else f"{money:.4f}")
        c.add_row(*row)
    console.print(unclipped(c))
    cf, g = plan.get("confirm") or {}, plan.get("gate") or {}
    if cf:
        n_centre = cf.get("center_replicates", cf["replicates"])
        console.print(f"confirmation: {cf['points_per_design']} design points × "
                      f"{cf['replicates']} seed(s), {n_centre} at the centre = "
                      f"{cf['trials_per_width']} trials to max_t per designed "
                      f"{per}{_designed(cf, plan)}; gate {g.get('setting')}: at most "
                      f"{g.get('max_rounds')} round(s), "
                      f"{g.get('trials_max')} trials", highlight=False)
    console.print(f"wall time ≈ {plan['wall_s_estimate'] / 60:.1f} min; per-trial Ray "
                  f"start-up/teardown assumed {plan['overhead_s_per_trial']:g} s and "
                  f"{plan.get('overhead_s_per_report', 0.0):g} s per report (its round trip "
                  "to the driver); planned "
                  "steps are successive halving's (asynchronous ASHA promotes early arrivals "
                  "more, so a real sweep trains somewhat more)", highlight=False)
    if plan["budget_gpu_hours"] is not None:
        verdict = "fits" if plan["fits_budget"] else "[red]does not fit[/]"
        console.print(f"budget {plan['budget_gpu_hours']:.6f} GPU-hours: the plan {verdict}")


def _timed_on(where: dict | None) -> str:
    """``, timed on cuda (NVIDIA H200) in a ray task`` — where the warm-up ran."""
    if not where:
        return ""
    name = where.get("device_name")
    dev = where.get("device", "?") + (f" ({name})" if name and name != "cpu" else "")
    place = ("this process" if where.get("where") == "driver"
             else "a Ray task holding one trial's resources")
    return f", timed on {dev} in {place}"


def _designed(confirm: dict[str, Any], plan: dict[str, Any]) -> str:
    """Which widths retrain a design, and what the others do (older plans: every width)."""
    ws = confirm.get("designed_widths")
    if ws is None or set(ws) >= {x["width"] for x in plan.get("widths", [])}:
        return ""
    return (f" (width {', '.join(map(str, ws))}; each wider width's rung optimum is moved to "
            "max_t by the widest designed width's shift)")
