"""Cost per project across sweeps (``mutune report --by project``): the ledger summed per
project, and its terminal table."""
from __future__ import annotations

from typing import Any

from mutune.services.report.formatting import fmt_num, unclipped

__all__ = ["project_costs", "render_project_costs", "SUMMED"]

#: Ledger figures summed per project by :func:`project_costs` (GPU-hours and money).
SUMMED = ("proxy_gpu_hours", "target_gpu_hours", "total_gpu_hours", "naive_gpu_hours",
          "saved_gpu_hours", "total_money", "naive_money", "saved_money")


def project_costs(sweeps: list[dict[str, Any]],
                  costs: dict[int, dict[str, float | None]]) -> list[dict[str, Any]]:
    """Sum the ledger across sweeps per project (``mutune report --by project``).

    Args:
        sweeps: sweep rows (``id``, ``project``, ``status``), as ``Store.list_sweeps``.
        costs: sweep id → sweep-scope ledger figures, as ``Store.sweep_costs``.
    Returns:
        One row per project (None: sweeps without a project), sorted by name: ``project``,
        ``sweeps``, ``priced_sweeps`` (sweeps with a ledger), the sums of
        :data:`SUMMED` (GPU-hours; money in the sweeps' currency; a money sum is None
        when no sweep was priced), and ``saved_fraction`` = Σ saved / Σ naive.
    """
    rows: dict[Any, dict[str, Any]] = {}
    for sw in sweeps:
        r = rows.setdefault(sw.get("project"), {"project": sw.get("project"), "sweeps": 0,
                                                "priced_sweeps": 0,
                                                **{k: None for k in SUMMED}})
        r["sweeps"] += 1
        c = costs.get(sw["id"])
        if not c or c.get("total_gpu_hours") is None:
            continue
        r["priced_sweeps"] += 1
        for k in SUMMED:
            if c.get(k) is not None:
                r[k] = (r[k] or 0.0) + float(c[k])
    for r in rows.values():
        naive, saved = r["naive_gpu_hours"], r["saved_gpu_hours"]
        r["saved_fraction"] = saved / naive if naive and saved is not None else None
    return sorted(rows.values(), key=lambda r: (r["project"] is None, r["project"] or ""))


def render_project_costs(rows: list[dict[str, Any]], console: Any) -> None:
    """Print :func:`project_costs`' rows on a rich ``console`` as one table (GPU-hours to 6
    decimals, money to 4, ``—`` where a sum is None)."""
    from rich.table import Table

    t = Table(title="Cost by project (GPU-hours)")
    for col in ("project", "sweeps", "priced", "proxy", "target", "total", "naive", "saved",
                "saved %", "money", "money saved"):
        t.add_column(col, justify="left" if col == "project" else "right")
    for r in rows:
        t.add_row(r["project"] or "(none)", str(r["sweeps"]), str(r["priced_sweeps"]),
                  *(fmt_num(r[k], ".6f") for k in ("proxy_gpu_hours", "target_gpu_hours",
                                                  "total_gpu_hours", "naive_gpu_hours",
                                                  "saved_gpu_hours")),
                  fmt_num(r["saved_fraction"], ".1%"), fmt_num(r["total_money"], ".4f"),
                  fmt_num(r["saved_money"], ".4f"))
    console.print(unclipped(t))
