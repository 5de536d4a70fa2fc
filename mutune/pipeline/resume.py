"""Finish an interrupted sweep (``mutune resume``, DESIGN.md §4): the main job's stages,
continued from the rows the results database holds.

Like :mod:`mutune.pipeline`, this module never imports the store: the caller hands it the
sweep's rows (``Store.sweep_rows``) and the store as its recorder, after ending the trials whose
heartbeat is older than their lease (``mutune.services.api.reap_stale``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mutune.errors import SearchError
from mutune.pipeline import (PipelineResult, Progress, ProxyResult, SweepRun, _bind,
                             finish_sweep, open_sweep, sweep_width, trial_curves)
from mutune.recording import Recorder

__all__ = ["resume_pipeline", "resume_width", "trial_records"]


def resume_pipeline(recorder: Recorder, rows: dict[str, Any], *, out_dir: Path,
                    on_progress: Progress | None = None) -> PipelineResult:
    """Finish an interrupted sweep from its recorded rows (``mutune resume``, DESIGN.md §4).

    Proxy widths already completed are rebuilt from their rows; the interrupted width
    continues with its saved scheduler and searcher state (reports recorded after the last
    save are fed to them again, in sequence order), its unfinished trials resume from their
    checkpoints under their database rows, and only the missing trials start, so the width
    ends with exactly ``num_samples`` trials; later widths, the rules, the target and the
    ledger then run as in :func:`run_pipeline`. The caller must first end the trials whose
    heartbeat is older than their lease (``Store.mark_stale``): a trial still ``running``
    in ``rows`` is taken as interrupted.

    Args:
        rows: :meth:`Store.sweep_rows` of the sweep.
    Raises:
        SearchError: the sweep already completed, or it was interrupted after its proxy sweeps
            (rules recorded): re-running later stages in place is not supported (use rerun).
    """
    from mutune.config import parse_config

    sweep = rows["sweep"]
    if sweep["status"] == "completed":
        raise SearchError(f"sweep {sweep['id']} already completed; nothing to resume")
    if rows["rules"] or rows["target"] is not None:
        raise SearchError(f"sweep {sweep['id']} was interrupted after its proxy sweeps "
                          "(transfer rules recorded); resume continues proxy sweeps only — "
                          "use `mutune rerun`")
    config = parse_config(sweep["config"], source=f"sweep {sweep['id']}")
    last_seq = max([e["seq"] for e in rows["events"]]
                   + [r["seq"] for t in rows["trials"] for r in t["reports"]] + [0])
    with open_sweep(config, recorder, out_dir=out_dir, on_progress=on_progress,
                    resume=(sweep["id"], last_seq)) as run:
        swept = []
        for i, width in enumerate(config.widths):
            ps = next((p for p in rows["proxy_sweeps"] if p["width"] == width
                       and "check" not in (p["settings"] or {})), None)
            swept.append(sweep_width(run, width, i) if ps is None
                         else resume_width(run, width, i, ps, rows))
        return finish_sweep(run, swept)


def trial_records(trial_rows: list[dict[str, Any]], seeds: list[int],
                  replicates: int = 1) -> list[Any]:
    """Rebuild the driver's :class:`~mutune.search.backends.ray_tune.callback.TrialRecord` of recorded trials
    (database rows with their reports); ``index`` is the trial's position in ``seeds``
    (``replicates`` seeds per trial: its first seed's position // replicates)."""
    from mutune.search.backends.ray_tune.callback import TrialRecord

    out = []
    for t in trial_rows:
        reports = [{"step": int(r["step"]), **{k: float(v) for k, v in r["metrics"].items()}}
                   for r in t["reports"]]
        seed = int(t["seed"])
        pos = seeds.index(seed) if seed in seeds else -1
        point = {"hparams": dict(t["config"]), "seed": seed,
                 "index": pos // replicates if pos >= 0 else -1, "key": t["key"]}
        if replicates > 1 and pos >= 0:
            point["replicate_seeds"] = [int(x) for x in seeds[pos:pos + replicates]]
        rec = TrialRecord(t["key"], int(t["id"]), point, 0.0, reports=reports,
                          status=t["status"], reason=t["reason"])
        last = reports[-1] if reports else {}
        rec.restarts = int(t.get("restarts") or 0)
        rec.restarts_booked = rec.restarts
        rec.repeated_steps = int(t.get("repeated_steps") or 0)
        rec.recovery_s = float(t.get("recovery_s") or 0.0)
        if t["status"] == "running" or t["allocated_s"] is None:
            # never released: the seconds it is known to have held are its reported ones
            rec.held_s = sum(float(last.get(k, 0.0)) for k in ("productive_s", "eval_s",
                                                               "setup_s"))
        else:
            rec.timing = {k: t[k] for k in ("allocated_s", "productive_s", "eval_s",
                                            "overhead_s", "steps", "samples", "devices",
                                            "device_kind", "restarts", "repeated_steps",
                                            "recovery_s", "checkpoint_s")}
            rec.timing["setup_s"] = float(last.get("setup_s", 0.0))
            rec.timing.update(evals=len(reports), n_params=float(last.get("n_params", 0.0)))
        out.append(rec)
    return out


def _unfinished(rec: Any) -> bool:
    """Running when the driver died, or reaped as stale: to continue from its checkpoint."""
    return rec.status == "running" or (rec.status == "failed"
                                       and (rec.reason or "").startswith("stale:"))


def _latest_checkpoint(trial_dir: str | None) -> str | None:
    """The newest complete checkpoint folder of a trial (Ray numbers them in order)."""
    from mutune.search.trial.checkpoint import STATE_FILE

    if not trial_dir or not Path(trial_dir).is_dir():
        return None
    found = sorted(p.parent for p in Path(trial_dir).glob(f"checkpoint_*/{STATE_FILE}"))
    return str(found[-1]) if found else None


def resume_width(run: SweepRun, width: int, index: int, ps: dict[str, Any],
                 rows: dict[str, Any]) -> tuple[ProxyResult, Any]:
    """Continue (or, if it completed, rebuild) the proxy sweep ``ps`` at ``width``.

    The scheduler core and searcher come back from their saved state; reports recorded after
    that save are fed to both again in sequence order (decisions they yield are recorded;
    repeats are ignored by the store); finished trials are kept; unfinished ones continue from
    their latest checkpoint (or from scratch without one) under their own rows and keys; new
    trials start until ``num_samples`` were proposed.

    Returns:
        (ProxyResult, RunOutcome), as :func:`sweep_width`.
    """
    from mutune.search.schedulers.asha import Decision
    from mutune.search.best import best_at_rung
    from mutune.search.schedulers.factory import scheduler_from_state
    from mutune.search.searchers import make_searcher
    from mutune.search.searchers.space import trial_seeds
    from mutune.search.backends.ray_tune.run import ResumeState, RunOutcome, make_core, run_trials
    from mutune.pipeline.transfer_stage import width_optimum

    config, recorder = run.config, run.recorder
    search, sched = config.search, config.search.scheduler
    reps = search.replicates
    seeds = trial_seeds(config.seed, index, search.num_samples * reps)
    trial_rows = [t for t in rows["trials"] if t["proxy_sweep_id"] == ps["id"]]
    records = trial_records(trial_rows, seeds, reps)
    core = (scheduler_from_state(ps["scheduler_state"]) if ps.get("scheduler_state")
            else make_core(sched, mode=search.mode, seed=config.seed))
    searcher = make_searcher(search, config.seed, index)
    if ps.get("searcher_state"):
        searcher.load_state(ps["searcher_state"])
    saved_seq = int(ps.get("state_seq") or 0)
    by_id = {r.trial_id: r for r in records}
    for rec in sorted((r for r in records if r.key not in searcher.proposed),
                      key=lambda r: r.point["index"]):   # proposed after the last save
        got = searcher.suggest(rec.key)
        if got != rec.point["hparams"]:
            raise SearchError(f"trial {rec.key!r}: the searcher proposes {got}, the recorded "
                              f"trial ran {rec.point['hparams']}: seed or settings changed")
    late = sorted(((r["seq"], t["id"], r) for t in trial_rows for r in t["reports"]
                   if r["seq"] > saved_seq), key=lambda x: x[0])
    for _, tid, r in late:
        rec = by_id[tid]
        value = float(r["metrics"]["val_loss"])
        searcher.observe(rec.key, int(r["step"]), value)
        if core.stopped(rec.key) is None and rec.key not in core.paused():
            for j in core.on_report(rec.key, int(r["step"]), value):
                recorder.scheduler_decided(tid, j.milestone, j.value, j.cutoff,
                                           j.decision.value, next(run.seq))
    if ps["status"] == "completed":
        outcome = RunOutcome(records, core, searcher)
    else:
        from mutune.search.backends.ray_tune.callback import close_record

        ray_cfg = config.ray
        for r in records:   # ended by the reports fed again above: close them, do not rerun
            if not _unfinished(r):
                continue
            ended = core.stopped(r.key)
            if ended is not None or r.last_step >= sched.max_t:
                status = ("diverged" if ended is Decision.DIVERGED else "stopped"
                          if ended is Decision.STOP else "completed")
                reason = (None if status == "completed" else "non-finite val_loss"
                          if status == "diverged" else
                          f"below the rung cutoff at step {r.last_step}")
                r.status = "running"
                close_record(r, status, reason, devices=ray_cfg.gpus_per_trial
                             or ray_cfg.cpus_per_trial, device_kind=ray_cfg.device_kind)
                recorder.trial_finished(r.trial_id, status, reason, r.timing)
        finished = [r for r in records if not _unfinished(r)]
        unfinished = [r for r in records if _unfinished(r)]
        for r in finished:
            if r.key in searcher.proposed:
                searcher.complete(r.key, r.status)
        trial_dir = {t["id"]: t.get("checkpoint_dir") for t in trial_rows}
        paused = core.paused()   # promotion: they wait at their rung until promoted
        points = {r.key: {**r.point, "restore_from": _latest_checkpoint(trial_dir[r.trial_id])}
                  for r in unfinished}
        resume = ResumeState([p for k, p in points.items() if k not in paused],
                             {r.key: r for r in unfinished}, finished,
                             dormant={k: p for k, p in points.items() if k in paused})
        outcome = run_trials(None, task=run.task, width=width, max_t=sched.max_t,
                             recorder=recorder, sweep_id=run.sweep_id, proxy_sweep_id=ps["id"],
                             kind="proxy", scheduler=sched, metric=search.metric,
                             mode=search.mode, ray_cfg=config.ray, storage=run.out_dir / "ray",
                             name=f"sweep{run.sweep_id}-w{width}-resumed", seq=run.seq,
                             on_progress=_bind(run.on_progress, f"width {width}",
                                               search.num_samples),
                             scheduler_seed=config.seed, searcher=searcher, seeds=seeds,
                             checkpoint_every=config.train.checkpoint_every,
                             checkpoint_keep=config.train.checkpoint_keep, core=core,
                             resume=resume, budget=run.budget, tracking=config.tracking,
                             replicates=reps)
    best = best_at_rung(outcome.core.rung_values(), mode=search.mode, min_trials=3,
                        scope=search.best_scope, curves=trial_curves(outcome.trials))
    rec = next(t for t in outcome.trials if t.key == best.trial)
    optimum = width_optimum(config, outcome, best)
    result = ProxyResult(width, ps["id"], rec.trial_id, dict(rec.point["hparams"]), best.value,
                         best.milestone, len(outcome.trials), optimum)
    if ps["status"] != "completed":
        recorder.proxy_sweep_finished(ps["id"], {
            "trial_id": rec.trial_id, "milestone": best.milestone,
            "config": rec.point["hparams"], "val_loss": best.value,
            "trials": len(outcome.trials), "rung_trials": best.n_trials, "optimum": optimum})
    return result, outcome
