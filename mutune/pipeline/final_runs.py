"""Train given configurations with given seeds to a horizon (the benchmarks' evaluation runs),
recorded as ``confirm`` trials under a proxy sweep row of their own."""
from __future__ import annotations

import itertools
import math
from typing import Any

from mutune.pipeline.sweep import SweepRun

__all__ = ["train_configs"]


def train_configs(run: SweepRun, width: int, configs: list[dict[str, float]],
                  seeds: list[int], steps: int, label: str
                  ) -> list[dict[str, Any]]:
    """Train every configuration with every seed at ``width`` for ``steps`` steps.

    Returns one row per run ({"config_index", "seed", "status", "val_loss", "test_loss", …});
    a run that did not complete has ``inf`` losses.

    Raises:
        SweepStopped: ``mutune cancel`` stopped the runs."""
    from mutune.errors import SweepStopped
    from mutune.pipeline.sweep import stage_settings
    from mutune.search.backends.base import run_group
    from mutune.search.backends.groups import GroupSpec

    ps = run.recorder.proxy_sweep_started(run.sweep_id, width, {"stage": label,
                                                                "seeds": list(seeds)})
    points = [{"hparams": h, "seed": s, "index": i}
              for i, (h, s) in enumerate(itertools.product(configs, seeds))]
    outcome = run_group(run.backend, GroupSpec(width, ps, f"{label}w{width}", points=points),
                        stage_settings(run, name=f"sweep{run.sweep_id}-{label}", max_t=steps,
                                       kind="confirm"))
    if outcome.stopped is not None:
        raise SweepStopped("cancelled", outcome.stopped)
    rows = []
    for t in outcome.trials:
        last = t.reports[-1] if t.reports else {}
        done = t.status == "completed"
        rows.append({"config_index": t.point["index"] // len(seeds), "seed": t.point["seed"],
                     "status": t.status, "trial_id": t.trial_id,
                     **{k: float(last.get(k, math.nan)) if done else math.inf
                        for k in ("val_loss", "test_loss")},
                     **{k: last.get(k) for k in ("val_loss_se", "test_loss_se")}})
    run.recorder.proxy_sweep_finished(ps, {"stage": label, "runs": len(rows)})
    return rows
