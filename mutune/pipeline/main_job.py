"""The main job: proxy sweeps → transfer rules → one target run → the ledger."""
from __future__ import annotations

from pathlib import Path

from mutune.checks import CheckRecord
from mutune.config import SweepConfig
from mutune.errors import SweepStopped
from mutune.pipeline.gate import confirm_proxies, gate_rules
from mutune.pipeline.importance import proxy_importance
from mutune.pipeline.ledger_stage import record_cost
from mutune.pipeline.proxy_stage import align_optima, sweep_ladder, sweep_widths
from mutune.pipeline.recording import Recorder
from mutune.pipeline.stage_groups import StageGroups
from mutune.pipeline.sweep import PipelineResult, Progress, SweepRun, open_sweep
from mutune.search.backends.base import Backend
from mutune.pipeline.target_stage import (admit_target, predict_target_loss, proxy_curve,
                                          train_target)

__all__ = ["run_pipeline", "finish_sweep"]


def run_pipeline(config: SweepConfig, recorder: Recorder, *, out_dir: Path,
                 on_progress: Progress | None = None,
                 backend: Backend | None = None, own_folder: bool = False) -> PipelineResult:
    """Run the main job for ``config``, recording into ``recorder``; its files go to
    ``out_dir``, or with ``own_folder`` to ``out_dir/sweep-<ID>/`` (:func:`open_sweep`).

    Raises:
        SearchError, ProxyError, FitError: a stage failed; the sweep is recorded as failed.
        SweepStopped: ``mutune cancel`` or the budget ended the sweep early."""
    with open_sweep(config, recorder, out_dir=out_dir, on_progress=on_progress,
                    backend=backend, own_folder=own_folder) as run:
        if config.depth_ladder:
            return finish_sweep(run, sweep_ladder(run))
        return finish_sweep(run, sweep_widths(run, list(config.widths)))


def finish_sweep(run: SweepRun, stages: StageGroups) -> PipelineResult:
    """What follows the proxies' run, for a new and a resumed sweep alike: full-horizon optima,
    rules and gate, the target run, the loss law, importance and the ledger.

    Raises:
        FitError, SearchError: a stage failed. SweepStopped: the budget refused the target, the
            gate stopped it, or the target diverged."""
    if run.config.transfer.confirm_replicates == 0:
        swept, states = align_optima(run, stages.final()), {}
    else:
        swept, states = confirm_proxies(run, stages)
    widest_p, widest = swept[-1]

    def importance() -> None:
        found = proxy_importance(run.config, widest_p.width, widest)
        if widest_p.depth is not None:
            found = {**found, "depth": widest_p.depth}
        run.recorder.check_recorded(run.sweep_id, CheckRecord("importance", found))
    # the loss law is needed before the target only to admit it under a budget; otherwise
    # it and the importance (proxy data alone) are fitted once the target has released the
    # devices, which then do not wait on them
    try:
        gated = gate_rules(run, swept, stages)
        swept, rules, target_hp = gated.swept, gated.rules, gated.target_hparams
        law = predict_target_loss(run, swept, target_hp) if run.budget is not None else None
        admit_target(run, law or {})
    except SweepStopped:
        importance()
        raise
    proxies = [p for p, _ in swept]
    designs = [d for s in states.values() for d in s.designs]
    target, trec = train_target(run, target_hp, gated.settings,
                                watch=proxy_curve(run.config, swept, designs))
    importance()
    if law is None:
        law = predict_target_loss(run, swept, target_hp)
    if law.get("predicted_val_loss") is not None:
        target["predicted_val_loss"] = law["predicted_val_loss"]
        target["predicted_val_loss_interval"] = law["predicted_val_loss_interval"]
    target["gate"] = {k: gated.record.get(k) for k in ("setting", "outcome", "warning")}
    if run.config.search.kind_of_metric != "loss":
        target["watch"] = {"skipped": f"the sweep's metric {run.config.search.metric!r} is a "
                                      "score: the target is watched against its proxies on "
                                      "losses only"}
    if target.get("watch"):
        run.recorder.check_recorded(run.sweep_id, CheckRecord("target_watch", target["watch"]))
    cost, _ = record_cost(run, {p.size: o for p, o in swept}, trec, extra=designs)
    if target["status"] == "diverged":
        raise SweepStopped("target_diverged", f"the target run diverged and was stopped: "
                                              f"{target['reason']}")
    return PipelineResult(run.sweep_id, proxies, rules, target, cost)
