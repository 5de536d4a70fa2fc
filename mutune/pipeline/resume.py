"""The one recovery path: finish an interrupted sweep from its recorded rows
(docs/architecture.md §4): completed widths rebuilt, interrupted ones continued from their
saved state and checkpoints, the stages after the proxies run again (what is recorded again
replaces what was)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from mutune.errors import SearchError
from mutune.pipeline.main_job import finish_sweep
from mutune.pipeline.depth_tasks import ladder_sizes
from mutune.pipeline.proxy_stage import (new_width, run_widths, width_result, width_results,
                                         width_seeds, width_spec)
from mutune.pipeline.recorded import continue_points, never_started, trial_records
from mutune.pipeline.recorded import unfinished as _unfinished
from mutune.pipeline.recording import Recorder
from mutune.pipeline.stage_groups import StageGroups
from mutune.pipeline.sweep import PipelineResult, Progress, ProxyResult, SweepRun, open_sweep

__all__ = ["resume_pipeline", "resume_width", "restore_width", "trial_records"]


def resume_pipeline(recorder: Recorder, rows: dict[str, Any], *, out_dir: Path,
                    on_progress: Progress | None = None, control: Any = None,
                    ray_address: str | None = None) -> PipelineResult:
    """Finish an interrupted sweep from its recorded rows; a trial still ``running`` in ``rows`` is
    taken as interrupted (the caller ends trials whose driver is gone first).

    Raises:
        SearchError: the sweep already completed, or its recorded state disagrees with what
            its seed and settings give now."""
    from mutune.config import parse_config

    sweep = rows["sweep"]
    if sweep["status"] == "completed":
        raise SearchError(f"sweep {sweep['id']} already completed; nothing to resume")
    config = parse_config(sweep["config"], source=f"sweep {sweep['id']}")
    if ray_address:
        config = config.model_copy(update={"ray": config.ray.model_copy(
            update={"address": ray_address})})
    last_seq = max([e["seq"] for e in rows["events"]]
                   + [r["seq"] for t in rows["trials"] for r in t["reports"]] + [0])
    with open_sweep(config, recorder, out_dir=out_dir, on_progress=on_progress,
                    resume=(sweep["id"], last_seq), control=control or recorder) as run:
        run.recorded = {t["key"]: t for t in rows["trials"]
                        if t["kind"] in ("confirm", "target")}
        run.recorded_target = rows.get("target")
        if run.budget is not None:
            run.budget.add_prior(spent_before(rows))
        # a proxy is (width, None), or (width, depth) on a depth ladder (the depth is in its
        # proxy sweep row's settings)
        sizes = (ladder_sizes(config) if config.depth_ladder
                 else [(w, None) for w in config.widths])
        stages = StageGroups(run, sizes)
        specs, spec_depths = [], []
        for i, (width, depth) in enumerate(sizes):
            ps = next((p for p in rows["proxy_sweeps"] if p["width"] == width
                       and (p["settings"] or {}).get("depth") == depth
                       and "check" not in (p["settings"] or {})), None)
            got = (new_width(run, width, i, depth) if ps is None
                   else restore_width(run, width, i, ps, rows, depth=depth))
            if isinstance(got, tuple):
                stages.rebuilt(*got)
            else:
                stages.swept(got.group, width, depth, got.proxy_sweep_id)
                specs.append(got)
                spec_depths.append(depth)
        ran = run_widths(run, specs, stages=stages, name=f"sweep{run.sweep_id}-resumed")
        width_results(run, [(s.width, s.proxy_sweep_id, o) for s, o in zip(specs, ran)],
                      depths=spec_depths, stages=stages)
        return finish_sweep(run, stages)


def spent_before(rows: dict[str, Any]) -> float:
    """Device-hours the sweep's ended trials spent before the interruption."""
    total = 0.0
    for t in rows["trials"]:
        rec = SimpleNamespace(status=t["status"], reason=t.get("reason"))
        if not _unfinished(rec) and t.get("allocated_s") is not None:
            total += float(t["allocated_s"]) * float(t.get("devices") or 1.0)
    return total / 3600.0


def resume_width(run: SweepRun, width: int, index: int, ps: dict[str, Any],
                 rows: dict[str, Any]) -> tuple[ProxyResult, Any]:
    """Continue (or rebuild) the proxy sweep ``ps`` at ``width`` alone in its Ray Tune run.

    Raises:
        SearchError: the recorded state disagrees with the seed and settings."""
    got = restore_width(run, width, index, ps, rows)
    if isinstance(got, tuple):
        return got
    (outcome,) = run_widths(run, [got], name=f"sweep{run.sweep_id}-w{width}-resumed")
    return width_result(run, width, ps["id"], outcome), outcome


def restore_width(run: SweepRun, width: int, index: int, ps: dict[str, Any],
                  rows: dict[str, Any], *, depth: int | None = None
                  ) -> tuple[ProxyResult, Any] | Any:
    """Rebuild the proxy sweep ``ps`` at ``width`` from the database: a completed one as its
    (ProxyResult, RunOutcome), an interrupted one as the GroupSpec that continues it.

    Raises:
        SearchError: the searcher, rebuilt from the seed, proposes other points than the
            recorded trials ran (the seed or the settings changed)."""
    from mutune.search.backends.trial_record import close_record
    from mutune.search.backends.groups import ResumeState, RunOutcome, make_core
    from mutune.search.driver import STATUS_OF, catch_up
    from mutune.search.schedulers.factory import scheduler_from_state
    from mutune.search.searchers import make_searcher

    config, recorder = run.config, run.recorder
    search, sched = config.search, config.search.scheduler
    seeds = width_seeds(run, index)
    trial_rows = [t for t in rows["trials"] if t["proxy_sweep_id"] == ps["id"]
                  and t["kind"] == "proxy"]
    records = trial_records(trial_rows, seeds, search.replicates)
    core = (scheduler_from_state(ps["scheduler_state"]) if ps.get("scheduler_state")
            else make_core(sched, mode=search.mode, seed=config.seed))
    searcher = make_searcher(search, config.seed, index)
    if ps.get("searcher_state"):
        searcher.load_state(ps["searcher_state"])
    saved_seq = int(ps.get("state_seq") or 0)
    by_id = {r.trial_id: r for r in records}
    for rec in sorted((r for r in records if r.key not in searcher.proposed),
                      key=lambda r: r.point["index"]):
        got = searcher.suggest(rec.key)
        if got != rec.point["hparams"]:
            raise SearchError(f"trial {rec.key!r}: the searcher proposes {got}, the recorded "
                              f"trial ran {rec.point['hparams']}: seed or settings changed")
    late = sorted(((r["seq"], t["id"], r) for t in trial_rows for r in t["reports"]
                   if r["seq"] > saved_seq), key=lambda x: x[0])
    key_id = {by_id[tid].key: tid for _, tid, _ in late}
    for j in catch_up(core, searcher, [(by_id[tid].key, int(r["step"]),
                                        float(r["metrics"][config.search.metric]))
                                       for _, tid, r in late]):
        recorder.scheduler_decided(key_id[j.trial], j.milestone, j.value, j.cutoff,
                                   j.decision.value, next(run.seq))
    if ps["status"] == "completed":
        outcome = RunOutcome(records, core, searcher)
        return width_result(run, width, ps["id"], outcome, record=False, depth=depth), outcome
    ray_cfg = config.ray
    for r in records:   # ended by the reports fed again above: close them, do not rerun
        ended = core.ended(r.key)
        if not _unfinished(r) or (ended is None and r.last_step < sched.max_t):
            continue
        status = STATUS_OF[ended] if ended is not None else "completed"
        reason = (None if status == "completed" else "non-finite val_loss"
                  if status == "diverged" else f"below the rung cutoff at step {r.last_step}")
        r.status = "running"
        close_record(r, status, reason, devices=ray_cfg.gpus_per_trial
                     or ray_cfg.cpus_per_trial, device_kind=ray_cfg.priced_kind or "cuda")
        recorder.trial_finished(r.trial_id, status, reason, r.timing)
        if run.budget is not None:        # ended here, held before: spent, in no book
            run.budget.add_prior(r.timing["allocated_s"] * r.timing["devices"] / 3600.0)
    unfinished, finished, cont = continue_points(records, trial_rows)
    cont += never_started(searcher.proposed, records, seeds, search.replicates)
    for r in finished:
        searcher.complete(r.key, r.status)
    paused = core.paused()   # promotion: they wait at their rung until promoted
    points = {p["key"]: p for p in cont}
    resume = ResumeState([p for k, p in points.items() if k not in paused],
                         {r.key: r for r in unfinished}, finished,
                         dormant={k: p for k, p in points.items() if k in paused})
    return width_spec(run, width, index, ps["id"], searcher, core=core, resume=resume,
                      depth=depth)

