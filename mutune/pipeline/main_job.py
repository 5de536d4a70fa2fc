"""The main job: proxy sweeps → transfer rules → one target run → the ledger.

:func:`run_pipeline` calls the stages in order and hands each the recorder it is given (the
results store, opened by the caller); it never imports the store itself. Every stage's rows
reach the recorder as they happen. :func:`finish_sweep` is the part after the proxy sweeps,
shared by a new sweep and a resumed one (:mod:`mutune.pipeline.resume`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mutune.config import SweepConfig
from mutune.pipeline.ledger_stage import record_cost
from mutune.pipeline.proxy_stage import align_optima, sweep_width
from mutune.pipeline.recording import Recorder
from mutune.pipeline.sweep import PipelineResult, Progress, ProxyResult, SweepRun, open_sweep
from mutune.pipeline.target_stage import admit_target, predict_target_loss, train_target
from mutune.pipeline.transfer_stage import fit_rules

__all__ = ["run_pipeline", "finish_sweep"]


def run_pipeline(config: SweepConfig, recorder: Recorder, *, out_dir: Path,
                 on_progress: Progress | None = None) -> PipelineResult:
    """Run the main job for ``config``, recording into ``recorder``.

    Args:
        config: the validated sweep config.
        recorder: receives every row (see :mod:`mutune.pipeline.recording`).
        out_dir: folder for Ray Tune's experiment state (``out_dir/ray``).
        on_progress: called with (stage label, done, total) as trials finish.
    Returns:
        PipelineResult with the sweep id, per-width bests, rules, target and cost figures.
    Raises:
        SearchError, ProxyError, FitError: a stage failed; the sweep is recorded as failed
            with the reason, and everything recorded before stays.
        SweepStopped: ``mutune cancel`` (or the budget) ended the sweep early; recorded with
            that status, the error carries the sweep id.
    """
    with open_sweep(config, recorder, out_dir=out_dir, on_progress=on_progress) as run:
        return finish_sweep(run, [sweep_width(run, width, i)
                                  for i, width in enumerate(config.widths)])


def finish_sweep(run: SweepRun, swept: list[tuple[ProxyResult, Any]]) -> PipelineResult:
    """The stages after the proxy sweeps, for a new sweep and a resumed one alike: optima at
    one common rung (:func:`align_optima`), the transfer rules, the loss law's prediction, the
    target run (if the budget admits it) and the ledger.

    Args:
        swept: (ProxyResult, RunOutcome) per proxy width, in width order.
    Raises:
        FitError, SearchError: a stage failed. SweepStopped: the budget refused the target.
    """
    swept = align_optima(run, swept)
    proxies = [p for p, _ in swept]
    rules, target_hp, settings = fit_rules(run, proxies)
    law = predict_target_loss(run, swept, target_hp)
    admit_target(run, law)
    target, trec = train_target(run, target_hp, settings)
    if law.get("predicted_val_loss") is not None:
        target["predicted_val_loss"] = law["predicted_val_loss"]
        target["predicted_val_loss_interval"] = law["predicted_val_loss_interval"]
    cost, _ = record_cost(run, {p.width: o for p, o in swept}, trec)
    return PipelineResult(run.sweep_id, proxies, rules, target, cost)
