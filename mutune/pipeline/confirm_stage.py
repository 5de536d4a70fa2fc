"""The confirmation stage: a face-centred central composite design around each width's best
configuration, retrained to ``max_t`` (Box & Wilson 1951, JRSS B 13; Myers, Montgomery &
Anderson-Cook, "Response Surface Methodology", ch. 7, replicated centre §7.4), because short
rungs favour large learning rates (Wu et al. 2018, ICLR, §3–4)."""
from __future__ import annotations

import itertools
import math
from typing import Any

from mutune.config import Choice, SweepConfig
from mutune.config.spaces import clip_valid, is_categorical
from mutune.pipeline.depth_tasks import task_at_depth
from mutune.pipeline.fitted_rule import size_label
from mutune.pipeline.sweep import ProxyResult, SweepRun, bind_progress

__all__ = ["design_names", "design_points", "design_allocation", "trials_per_design",
           "design_center", "design_spec", "designed_widths", "CONFIRM_SEED_BASE"]

#: the confirmation trials' seed streams start here (width index + round × 100 added), far
#: from the proxy sweeps' (0 … k−1) and the target's (k)
CONFIRM_SEED_BASE = 10_000


def design_names(config: SweepConfig) -> list[str]:
    """The continuous searched hyperparameters the design varies, sorted."""
    return sorted(n for n, d in config.search.space.items() if not isinstance(d, Choice))


def _offsets(d: int) -> list[tuple[int, ...]]:
    if d == 1:
        return [(k,) for k in (-2, -1, 0, 1, 2)]
    if d == 2:
        return list(itertools.product((-1, 0, 1), repeat=2))
    axial = [tuple(s if j == i else 0 for j in range(d)) for i in range(d) for s in (-1, 1)]
    return [(0,) * d, *axial, *itertools.product((-1, 1), repeat=d)]


def design_points(center: dict[str, float], names: list[str],
                  step_octaves: float) -> list[dict[str, float]]:
    """The face-centred design around ``center``: each name × 2^(level × step_octaves), level ∈
    {−1, 0, 1} ({−2 … 2} for one hyperparameter), centre included, in a fixed order.

    Raises:
        ValueError: a varied value not finite > 0, step not > 0, or no names."""
    if not names:
        raise ValueError("a design needs at least one hyperparameter to vary")
    if not (math.isfinite(step_octaves) and step_octaves > 0):
        raise ValueError(f"step_octaves = {step_octaves}: must be a finite number > 0")
    for n in names:
        v = center.get(n)
        if v is None or not (math.isfinite(v) and v > 0):
            raise ValueError(f"design centre {n} = {v!r}: must be a finite number > 0")
    # a level past where a knob is defined (β2 × 2 > 1) is held at its edge
    return [{**center, **{n: clip_valid(n, center[n] * 2.0 ** (o * step_octaves))
                          for n, o in zip(names, offs)}}
            for offs in _offsets(len(names))]


def design_allocation(n_dims: int, replicates: int, center_replicates: int) -> list[int]:
    """Seeds per point in :func:`design_points` order (``max(replicates, center_replicates)`` at
    the centre).

    Raises:
        ValueError: ``n_dims`` < 1 or ``replicates`` < 1."""
    if n_dims < 1 or replicates < 1:
        raise ValueError(f"a design needs n_dims ≥ 1 and replicates ≥ 1 "
                         f"(got {n_dims}, {replicates})")
    return [max(replicates, center_replicates) if not any(o) else replicates
            for o in _offsets(n_dims)]


def trials_per_design(config: SweepConfig) -> int:
    """Full-horizon trials one design trains (0 when confirmation is off)."""
    tr, d = config.transfer, len(design_names(config))
    if tr.confirm_replicates == 0 or d == 0:
        return 0
    return sum(design_allocation(d, tr.confirm_replicates, tr.confirm_center_replicates))


def designed_widths(config: SweepConfig, widths: list[int]) -> set[int]:
    """The proxy widths that retrain a first confirmation design: the
    ``transfer.confirm_widths`` narrowest of ``widths`` (every one for ``all``, none when
    confirmation is off); the wider ones take a moved rung optimum
    (:mod:`mutune.pipeline.horizon_shift`)."""
    if trials_per_design(config) == 0:
        return set()
    ordered = sorted(set(widths))
    n = config.transfer.confirm_widths
    return set(ordered if n == "all" else ordered[:n])


def design_center(config: SweepConfig, proxy: ProxyResult) -> dict[str, float]:
    """The centre of a width's first design: the sweep's best point, categorical knobs at its
    choice."""
    values = proxy.optimum.optimum if proxy.optimum else {}
    chosen = {n: values[n] for n, d in config.search.space.items()
              if is_categorical(d) and n in values}
    return {**config.search.fixed, **proxy.best_config, **chosen}


def design_spec(run: SweepRun, proxy: ProxyResult, index: int, center: dict[str, float], *,
                round_: int = 0) -> Any:
    """The :class:`~mutune.search.backends.groups.GroupSpec` of one width's design (group
    ``c{round}w{width}``); trials a resumed sweep had recorded are kept or continued."""
    from mutune.pipeline.recorded import recorded_trials
    from mutune.search.backends.groups import GroupSpec
    from mutune.search.searchers.space import trial_seeds

    config = run.config
    names = design_names(config)
    tr = config.transfer
    alloc = design_allocation(len(names), tr.confirm_replicates, tr.confirm_center_replicates)
    pts = design_points(center, names, tr.confirm_step)
    seeds = trial_seeds(config.seed, CONFIRM_SEED_BASE + 100 * round_ + index, sum(alloc))
    hps = [p for p, n in zip(pts, alloc) for _ in range(n)]
    group = f"c{round_}w{proxy.width}" + ("" if proxy.depth is None else f"d{proxy.depth}")
    points = [{"hparams": p, "seed": seeds[k], "index": k, "key": f"{group}-t{k}"}
              for k, p in enumerate(hps)]
    new, resume = recorded_trials(run, points, seeds)
    return GroupSpec(proxy.width, proxy.proxy_sweep_id, group, points=new, resume=resume,
                     kind="confirm",
                     task=None if proxy.depth is None else task_at_depth(run, proxy.depth),
                     task_key=None if proxy.depth is None else f"d{proxy.depth}",
                     on_progress=bind_progress(
                         run.on_progress, ("confirm" if round_ == 0 else f"gate round {round_}")
                         + f" {size_label(proxy.width, proxy.depth)}", len(points)))
