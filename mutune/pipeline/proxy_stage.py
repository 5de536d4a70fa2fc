"""The proxy stage: every width's ASHA/Hyperband sweep in one Ray Tune run, each width's best
trial at equal budget and its optimum (docs/architecture.md §4)."""
from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING, Any

from mutune.errors import SearchError, SweepStopped
from mutune.pipeline.depth_tasks import issue_order, ladder_sizes, task_at_depth
from mutune.pipeline.proxy_best import trial_curves, width_result
from mutune.pipeline.sweep import (ProxyResult, SweepRun, bind_progress, record_best,
                                   stage_settings)

if TYPE_CHECKING:
    from mutune.pipeline.stage_groups import StageGroups

__all__ = ["sweep_widths", "sweep_width", "sweep_ladder", "run_widths", "width_spec",
           "new_width", "width_result", "width_results", "align_optima", "record_best",
           "trial_curves", "proxy_settings", "width_seeds"]


def proxy_settings(run: SweepRun) -> dict[str, Any]:
    """What a proxy sweep row records of its settings."""
    config = run.config
    search, sched = config.search, config.search.scheduler
    return {"scheduler": {**sched.model_dump(), "seed": config.seed},
            "searcher": search.searcher, "num_samples": search.num_samples,
            "replicates": search.replicates, "metric": search.metric, "mode": search.mode,
            "parametrization": config.model.parametrization}


def width_seeds(run: SweepRun, index: int) -> list[int]:
    """The training seeds of proxy width number ``index``: ``replicates`` per trial."""
    from mutune.search.searchers.space import trial_seeds

    search = run.config.search
    return trial_seeds(run.config.seed, index, search.num_samples * search.replicates)


def width_spec(run: SweepRun, width: int, index: int, proxy_sweep_id: int, searcher: Any, *,
               core: Any = None, resume: Any = None, depth: int | None = None) -> Any:
    """The :class:`~mutune.search.backends.groups.GroupSpec` of proxy width ``width``: fresh, or
    continued with its restored ``core``, ``searcher`` and resume state."""
    from mutune.pipeline.fitted_rule import size_label
    from mutune.search.backends.groups import GroupSpec

    search = run.config.search
    group = f"w{width}" if depth is None else f"w{width}d{depth}"
    return GroupSpec(width, proxy_sweep_id, group, searcher=searcher,
                     seeds=width_seeds(run, index), replicates=search.replicates, core=core,
                     resume=resume, task=None if depth is None else task_at_depth(run, depth),
                     task_key=None if depth is None else f"d{depth}",
                     on_progress=bind_progress(run.on_progress, size_label(width, depth),
                                               search.num_samples))


def run_widths(run: SweepRun, specs: list[Any], *, stages: StageGroups | None = None,
               name: str | None = None) -> list[Any]:
    """The groups of ``specs`` in one Ray Tune run, widest first; ``stages`` joins the designs and
    gate rounds as they are released. Returns the RunOutcomes in ``specs`` order.

    Raises:
        SweepStopped: ``mutune cancel`` stopped it."""
    from mutune.search.backends.base import CheckpointPolicy

    config = run.config
    sched = config.search.scheduler
    ready = stages.ready() if stages is not None else []
    groups = [*ready, *sorted(specs, key=issue_order)]
    if not groups:
        return []
    widths = "-".join(s.group for s in specs) or "stages"
    # a depth ladder ships every depth's task: a design joins with its proxy's
    task = ({f"d{d}": task_at_depth(run, d) for _, d in ladder_sizes(config)}
            if config.depth_ladder else run.task)
    settings = stage_settings(
        run, name=name or f"sweep{run.sweep_id}-{widths}", max_t=sched.max_t, task=task,
        kind="proxy", scheduler=sched, scheduler_seed=config.seed, budget=run.budget,
        tracking=config.tracking,
        checkpoints=CheckpointPolicy(every=config.train.checkpoint_every,
                                     keep=config.train.checkpoint_keep,
                                     spot=config.cost.spot.model_dump()))
    outcomes = run.backend.run_groups(groups, settings,
                                      None if stages is None else stages.follow)
    stopped = next((o.stopped for o in outcomes.values() if o.stopped is not None), None)
    if stopped is not None:
        raise SweepStopped("cancelled", stopped)
    if stages is not None:
        stages.ran(outcomes)
    return [outcomes[s.group] for s in specs]


def new_width(run: SweepRun, width: int, index: int, depth: int | None = None) -> Any:
    """Record the proxy sweep row of ``width`` and return its fresh :func:`width_spec`."""
    from mutune.search.searchers import make_searcher

    searcher = make_searcher(run.config.search, run.config.seed, index)
    settings = proxy_settings(run) if depth is None else {**proxy_settings(run), "depth": depth}
    ps_id = run.recorder.proxy_sweep_started(run.sweep_id, width, settings)
    return width_spec(run, width, index, ps_id, searcher, depth=depth)


def sweep_ladder(run: SweepRun) -> StageGroups:
    """Every (width, depth) of a depth ladder swept in one Ray Tune run, as its StageGroups.

    Raises:
        SearchError: every trial of a proxy diverged or failed.
        SweepStopped: cancelled, or the budget ran out (``budget_exhausted``)."""
    return _sweep_sizes(run, ladder_sizes(run.config))


def sweep_widths(run: SweepRun, widths: list[int]) -> StageGroups:
    """Every width of ``widths`` swept in one Ray Tune run, as its StageGroups.

    Raises:
        SearchError: every trial of a width diverged or failed.
        SweepStopped: cancelled, or the budget ran out (``budget_exhausted``)."""
    return _sweep_sizes(run, [(w, None) for w in widths])


def _sweep_sizes(run: SweepRun, sizes: list[tuple[int, int | None]]) -> StageGroups:
    from mutune.pipeline.stage_groups import StageGroups

    stages = StageGroups(run, sizes)
    specs = [new_width(run, w, i, d) for i, (w, d) in enumerate(sizes)]
    for s, (w, d) in zip(specs, sizes):
        stages.swept(s.group, w, d, s.proxy_sweep_id)
    ran = run_widths(run, specs, stages=stages)
    width_results(run, [(s.width, s.proxy_sweep_id, o) for s, o in zip(specs, ran)],
                  depths=[d for _, d in sizes], stages=stages)
    return stages


def sweep_width(run: SweepRun, width: int, index: int) -> tuple[ProxyResult, Any]:
    """One ASHA/Hyperband sweep at ``width`` alone, without designs, as (ProxyResult, RunOutcome).

    Raises:
        SearchError: every trial diverged or failed.
        SweepStopped: cancelled, or the budget ran out (``budget_exhausted``)."""
    spec = new_width(run, width, index)
    return width_results(run, [(width, spec.proxy_sweep_id, run_widths(run, [spec])[0])])[0]


def width_results(run: SweepRun, ran: list[tuple[int, int, Any]],
                  depths: list[int | None] | None = None,
                  stages: StageGroups | None = None) -> list[tuple[ProxyResult, Any]]:
    """(width, proxy sweep id, RunOutcome) per width → (ProxyResult, RunOutcome), recorded.

    Raises:
        SweepStopped: ``budget_exhausted`` (the reason names what each width kept).
        SearchError: a width's trials all diverged or failed."""
    from mutune.pipeline.fitted_rule import size_label

    cut = run.budget.exhausted if run.budget is not None else None
    ds = depths or [None] * len(ran)
    if cut is None:
        out = []
        for (w, ps, o), d in zip(ran, ds):
            p = stages.results.get(w if d is None else (w, d)) if stages else None
            if p is None:
                p = width_result(run, w, ps, o, depth=d)
                if stages is not None:
                    stages.rebuilt(p, o)
            out.append((p, o))
        return out
    kept = []
    for (w, ps, o), d in zip(ran, ds):
        if any(t.reports for t in o.trials):
            with contextlib.suppress(SearchError):
                width_result(run, w, ps, o, depth=d)
        kept.append(f"{size_label(w, d)} kept {len(o.trials)} of "
                    f"{run.config.search.num_samples} trials" if o.trials
                    else f"{size_label(w, d)} got no trial")
    raise SweepStopped("budget_exhausted", f"{cut}; " + "; ".join(kept))


def align_optima(run: SweepRun, swept: list[tuple[ProxyResult, Any]]
                 ) -> list[tuple[ProxyResult, Any]]:
    """Re-estimate every width's optimum at one common rung, so the widths compare at equal
    budget."""
    from mutune.pipeline.horizon_shift import rung_optimum
    from mutune.pipeline.transfer_stage import common_rung

    config = run.config
    m = common_rung(config, [o for _, o in swept])
    if m is None:
        return swept
    out = []
    for p, o in swept:
        before = p.optimum.milestone if p.optimum else None
        if before != m:
            opt, n_trials = rung_optimum(config, o, m)
            p = dataclasses.replace(p, optimum=dataclasses.replace(opt, aligned_from=before))
            record_best(run, p, n_trials)
        out.append((p, o))
    return out
