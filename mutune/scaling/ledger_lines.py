"""The ledger's sweep-level rows ``{"scope", "name", "value", "unit"}`` for the recorder."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mutune.config import SweepConfig

if TYPE_CHECKING:
    from mutune.scaling.cost import NaiveEstimate
    from mutune.scaling.idle import Held
    from mutune.scaling.time_split import SweepWaste

__all__ = ["NaiveLines", "Hold", "sweep_entries", "throughput_entries", "hold_entries",
           "naive_entries"]


@dataclass(frozen=True)
class NaiveLines:
    """The naive counterfactual's three lines (:func:`mutune.scaling.cost.naive_sweep_estimate`)
    and what they share."""
    one_seed: NaiveEstimate     # one seed per trial (the line savings use)
    replicates: NaiveEstimate   # the same with the proxies' search.replicates seeds per trial
    grid: NaiveEstimate         # a plain sweep of the same samples, every trial to max_t
    scope_note: str
    overhead_inputs: dict[str, Any]


@dataclass(frozen=True)
class Hold:
    """What the sweep held (devices × its span) and how those device-seconds were spent."""
    held: Held
    span_s: float | None
    held_device_s: float | None
    productive_device_s: float
    waste: SweepWaste
    idle_causes: dict[str, float] | None
    idle_check: dict[str, float] | None


#: the sweep-level figures recorded as ledger lines, and their units (GPU-h otherwise)
_SWEEP_LINES = ("proxy_gpu_hours", "target_gpu_hours", "total_gpu_hours", "saved_gpu_hours",
                "saved_fraction", "ideal_saved_fraction", "ettr", "trial_ettr", "sweep_ettr",
                "useful_gpu_hours",
                "gpu_hours_per_trial", "cost_to_final_metric_gpu_hours", "price_per_hour",
                "total_money", "naive_money", "saved_money")


def sweep_entries(config: SweepConfig, cost: dict[str, Any]) -> list[dict[str, Any]]:
    """The sweep's totals, spot economics and the figures of :data:`_SWEEP_LINES`."""
    cur = config.cost.currency
    units = {"saved_fraction": "1", "ideal_saved_fraction": "1", "ettr": "1", "trial_ettr": "1",
             "sweep_ettr": "1",
             "price_per_hour": f"{cur}/device-h", "total_money": cur, "naive_money": cur,
             "saved_money": cur}
    out: list[dict[str, Any]] = [
        {"scope": "sweep", "name": "repeated_steps", "value": float(cost["repeated_steps"]),
         "unit": "steps"},
        *({"scope": "sweep", "name": name, "value": float(cost[name]), "unit": unit}
          for name, unit in (("preemptions", "preemptions"), ("recovery_s", "s"),
                             ("upload_s", "s")))]
    if cost["spot"] is not None:
        out.append({"scope": "sweep", "name": "spot_economics",
                    "value": cost["spot"].get("overhead_fraction"), "unit": "1",
                    "formula": cost["spot"].get("formula"), "inputs": cost["spot"]})
    out += [{"scope": "sweep", "name": name, "value": cost[name], "unit": "bytes"}
            for name in ("checkpoint_bytes_written", "checkpoint_bytes_kept")]
    out += [{"scope": "sweep", "name": name, "value": cost[name],
             "unit": units.get(name, "GPU-h")}
            for name in _SWEEP_LINES if cost[name] is not None]
    return out


def throughput_entries(cost: dict[str, Any], target: Any) -> list[dict[str, Any]]:
    """The target's devices and samples per second (per device)."""
    tt = target.timing
    out: list[dict[str, Any]] = [{"scope": "sweep", "name": "target_devices",
                                  "value": float(tt["devices"]), "unit": "devices"}]
    for name in ("target_samples_per_s", "target_samples_per_device_s"):
        if cost[name] is not None:
            out.append({"scope": "sweep", "name": name, "value": cost[name],
                        "unit": "samples/s",
                        "formula": "samples (global batch × steps) / productive s"
                                   + (" / devices" if "device" in name else ""),
                        "inputs": {"samples": tt["samples"],
                                   "productive_s": tt["productive_s"],
                                   "devices": tt["devices"]}})
    return out


def hold_entries(hold: Hold) -> list[dict[str, Any]]:
    """Waste by category, the held GPU-hours, idle GPU-hours by cause and their check."""
    out: list[dict[str, Any]] = [
        {"scope": "waste", "name": cat, "value": v, "unit": "GPU-h"}
        for cat, v in hold.waste.waste_gpu_hours.items()]
    out.append({"scope": "sweep", "name": "held_gpu_hours",
                "value": hold.waste.allocated_s / 3600.0, "unit": "GPU-h",
                "formula": "span (sweep submitted → last trial end) × devices held",
                "inputs": {"span_s": hold.span_s, "devices_held": hold.held.devices,
                           "slots": hold.held.slots, "source": hold.held.source}})
    out += [{"scope": "idle", "name": cause, "value": v, "unit": "GPU-h"}
            for cause, v in (hold.idle_causes or {}).items()]
    if hold.idle_check is not None:
        out.append({"scope": "sweep", "name": "idle_breakdown_check",
                    "value": hold.idle_check["relative_gap"], "unit": "1",
                    "formula": "|Σ idle causes − (held − productive − eval − checkpoint − "
                               "set-up)| / (held − productive − eval − checkpoint − set-up)",
                    "inputs": hold.idle_check})
    return out


def naive_entries(naive: NaiveLines, cost: dict[str, Any]) -> list[dict[str, Any]]:
    """The three naive lines with their formulas and every input they were priced from."""
    shared = naive.overhead_inputs
    reps = shared["replicates_per_trial"]
    return [
        {"scope": "sweep", "name": "naive_gpu_hours", "value": naive.one_seed.gpu_hours,
         "unit": "GPU-h", "formula": naive.one_seed.formula + naive.scope_note,
         "inputs": {**naive.one_seed.inputs, **shared, "seeds_per_trial": 1}},
        {"scope": "sweep", "name": "naive_replicates_gpu_hours",
         "value": naive.replicates.gpu_hours, "unit": "GPU-h",
         "formula": cost["naive_replicates_formula"],
         "inputs": {**naive.replicates.inputs, **shared, "seeds_per_trial": reps}},
        {"scope": "sweep", "name": "naive_grid_gpu_hours", "value": naive.grid.gpu_hours,
         "unit": "GPU-h", "formula": naive.grid.formula,
         "inputs": {**naive.grid.inputs, **shared}}]
