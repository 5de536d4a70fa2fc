"""The gate before the target run (docs/transfer.md): a rule at the ``edge`` re-centres the
width's design past its clipped optimum (Box & Wilson 1951's sequential move); a ``noisy`` or
``fallback`` one retrains every first design with fresh seeds (a width moved by a designed
width's horizon shift gains them through that design). A rule still unhealthy after
the rounds stops the sweep or warns (``transfer.gate``); the gate is recorded as a law row."""
from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from mutune.checks import CheckRecord
from mutune.config.spaces import clip_valid
from mutune.errors import FitError, SweepStopped
from mutune.pipeline.sweep import ProxyResult, SweepRun, record_best
from mutune.pipeline.optimum_record import WidthOptimum

__all__ = ["confirm_proxies", "gate_rules", "plan_round", "refit_optimum", "fit_rules",
           "gate_problems", "GATED_VERDICTS", "ConfirmState", "GateRound", "GateStages", "Size",
           "GateOutcome"]

#: verdicts the gate acts on (``too_few_sizes`` needs another width, not another round)
GATED_VERDICTS = ("edge", "noisy", "fallback")


@dataclasses.dataclass
class ConfirmState:
    """Per width: its sweep's outcome, confirmation outcomes, first design's centre and designs."""
    sweep: Any
    designs: list[Any]
    center: dict[str, float]
    groups: list[str] = dataclasses.field(default_factory=list)

    @property
    def outcomes(self) -> list[Any]:
        return [self.sweep, *self.designs]


#: a proxy's key among the sweep's proxies: its width, or (width, depth) on a depth ladder
Size = Any


@dataclasses.dataclass
class GateRound:
    """One gate round as planned and as trained (``verdicts`` None: the fit failed)."""
    number: int
    problems: dict[str, str]
    actions: list[dict[str, Any]]
    groups: dict[str, Size]
    outcomes: dict[Size, Any] = dataclasses.field(default_factory=dict)
    verdicts: dict[str, str] | None = None

    @property
    def done(self) -> bool:
        """Whether every design of the round has ended."""
        return len(self.outcomes) == len(self.groups)



class GateStages(Protocol):
    """What the gate reads of the proxies' run once it has ended."""

    @property
    def states(self) -> dict[Size, ConfirmState]: ...

    @property
    def rounds(self) -> list[GateRound]: ...

    @property
    def first_verdicts(self) -> dict[str, str] | None: ...

    @property
    def fitted(self) -> tuple[list[dict[str, Any]], dict[str, float], dict[str, Any]] | None:
        ...

    def final(self) -> list[tuple[ProxyResult, Any]]: ...


def _gpu_hours(outcomes: list[Any]) -> tuple[float, int]:
    from mutune.scaling.cost import gpu_hours

    trials = [t for o in outcomes for t in o.trials]
    return (sum(gpu_hours(t.timing.get("allocated_s", 0.0), t.timing.get("devices", 1))
                for t in trials if t.timing), len(trials))


def refit_optimum(run: SweepRun, p: ProxyResult, state: ConfirmState) -> ProxyResult:
    """``p`` with its optimum refitted at the full horizon on ``state``'s designs, recorded; on
    failure ``full_horizon_error`` in its optimum (not recorded)."""
    from mutune.pipeline.full_horizon import full_horizon_optimum

    prior = p.optimum
    sweep_best = (prior.sweep_best if prior else None) or {
        "trial_id": p.best_trial_id, "milestone": p.milestone, "val_loss": p.best_val_loss,
        "config": p.best_config}
    try:
        # a categorical knob was chosen at the sweep's rung (the design keeps its choice):
        # its evidence stays with the optimum
        opt = dataclasses.replace(full_horizon_optimum(run.config, state.outcomes, state.center),
                                  sweep_best=sweep_best, choices=prior.choices if prior else {})
    except FitError as err:
        if prior is None:
            return p
        return dataclasses.replace(p, optimum=dataclasses.replace(
            prior, full_horizon_error=str(err)))
    p = dataclasses.replace(
        p, optimum=opt, milestone=opt.milestone,
        best_val_loss=p.best_val_loss if opt.best_val_loss is None else opt.best_val_loss,
        best_config=p.best_config if opt.best_config is None else dict(opt.best_config),
        best_trial_id=p.best_trial_id if opt.best_trial_id is None else opt.best_trial_id)
    record_best(run, p, opt.n_trials)
    return p


def confirm_proxies(run: SweepRun, stages: GateStages
                    ) -> tuple[list[tuple[ProxyResult, Any]], dict[Any, ConfirmState]]:
    """Each width's optimum refitted at the full horizon on its confirmation designs.

    Raises:
        SearchError: a proxy has no design."""
    from mutune.errors import SearchError

    if run.config.transfer.confirm_replicates == 0:
        return stages.final(), {}
    from mutune.pipeline.confirm_stage import designed_widths

    swept = stages.final()
    designed = designed_widths(run.config, [p.width for p, _ in swept])
    missing = [p.size for p, _ in swept if p.width in designed and (
        not stages.states.get(p.size, None) or not stages.states[p.size].designs)]
    if missing:
        raise SearchError(f"no confirmation design was trained for proxies {missing} "
                          "(transfer.confirm_replicates > 0 needs a continuous hyperparameter "
                          "in search.space)")
    return swept, dict(stages.states)


def fit_rules(run: SweepRun, swept: list[tuple[ProxyResult, Any]]
              ) -> tuple[list[dict[str, Any]], dict[str, float], dict[str, Any]]:
    """The transfer rules on the optima of ``swept``: (rule rows, target hparams, settings).

    Raises:
        FitError: a rule cannot be fitted."""
    from mutune.pipeline.transfer_stage import transfer_rules

    depths = [p.depth for p, _ in swept] if run.config.depth_ladder else None
    return transfer_rules(run.config, [p.width for p, _ in swept],
                          [_optimum_of(p) for p, _ in swept], depths)


def _optimum_of(p: ProxyResult) -> WidthOptimum:
    if p.optimum is None:
        raise FitError(f"{p.size}: no optimum was estimated for this proxy")
    return p.optimum


def gate_problems(rules: list[dict[str, Any]]) -> dict[str, str]:
    """Hyperparameter → what the gate acts on: a gated verdict, or ``edge`` when any width's
    optimum is at the edge."""
    out = {}
    for r in rules:
        if r["verdict"] in GATED_VERDICTS:
            out[r["hyperparameter"]] = r["verdict"]
        elif r.get("edge_widths"):
            out[r["hyperparameter"]] = "edge"
        elif (r.get("verdicts") or {}).get("depth") in GATED_VERDICTS:
            out[r["hyperparameter"]] = f"{r['verdicts']['depth']} along depth"
    return out


def _depth_of(p: ProxyResult) -> dict[str, int]:
    """``{"depth": d}`` for a depth ladder's proxy, else nothing."""
    return {} if p.depth is None else {"depth": p.depth}


def _widen_center(run: SweepRun, p: ProxyResult, names: list[str]) -> dict[str, float]:
    """The next design's centre: the quadratic's unclipped stationary point (Box & Wilson 1951's
    canonical analysis), at most ``widen_octaves`` past the clipped optimum."""
    import math

    opt = p.optimum
    tr = run.config.transfer
    if opt is None:
        return {**run.config.search.fixed, **p.best_config}
    center = {**run.config.search.fixed, **(opt.best_config or p.best_config)}
    stationary = opt.stationary or {}
    for n, v in opt.optimum.items():
        s = stationary.get(n)
        if s is None and n not in names:
            continue
        if n in names:
            sign = 1.0 if opt.edge_side.get(n) == "high" else -1.0
            if (opt.clipped or {}).get(n) and s is not None and s > 0:
                octaves = sign * math.log2(s / v)
            else:    # no stationary point beyond the data (a weighted mean, a bound):
                octaves = 2 * tr.confirm_step   # the next design starts where this one ended
            octaves = min(max(octaves, 0.0), tr.widen_octaves)
            center[n] = clip_valid(n, v * 2.0 ** (sign * octaves))
        else:
            center[n] = v
    return center


def _widening(p: ProxyResult, name: str, new_center: float) -> dict[str, Any]:
    """What a widen action records of one hyperparameter."""
    opt = p.optimum or WidthOptimum.from_json({})
    stationary = (opt.stationary or {}).get(name)
    best = (opt.best_config or p.best_config).get(name)
    return {"side": opt.edge_side.get(name), "new_center": new_center,
            "from": opt.optimum.get(name),
            "unclipped_center": None if stationary is None else float(stationary),
            "best_trial": None if best is None else float(best)}


def plan_round(run: SweepRun, swept: list[tuple[ProxyResult, Any]],
               states: dict[Any, ConfirmState], bad: dict[str, str]
               ) -> tuple[list[dict[str, Any]], list[tuple[ProxyResult, int, dict[str, float]]]]:
    """What one gate round does about ``bad``: (actions recorded, designs to train)."""
    from mutune.pipeline.confirm_stage import design_names

    tr = run.config.transfer
    continuous = set(design_names(run.config))
    edges = sorted(n for n, v in bad.items() if v == "edge" and n in continuous)
    actions, jobs = [], []
    for i, (p, _) in enumerate(swept):
        if edges:
            at_edge = [n for n in edges if p.optimum and p.optimum.on_edge.get(n)]
            if not at_edge:
                continue
            center = _widen_center(run, p, at_edge)
            actions.append({"width": p.width, **_depth_of(p), "action": "widen",
                            "hyperparameters": {n: _widening(p, n, center[n])
                                                for n in at_edge},
                            "new_design_center": dict(center)})
        elif p.size in states:      # a moved width gains seeds through its anchor's design
            center = states[p.size].center
            actions.append({"width": p.width, **_depth_of(p), "action": "replicates",
                            "added_seeds_per_point": tr.confirm_replicates,
                            "added_seeds_at_center": max(tr.confirm_replicates,
                                                         tr.confirm_center_replicates)})
        else:
            continue
        jobs.append((p, i, center))
    return actions, jobs


@dataclasses.dataclass(frozen=True)
class GateOutcome:
    """What the gate leaves for the target run."""
    swept: list[tuple[ProxyResult, Any]]
    rules: list[dict[str, Any]]
    target_hparams: dict[str, float]
    settings: dict[str, Any]
    record: dict[str, Any]


def gate_rules(run: SweepRun, swept: list[tuple[ProxyResult, Any]], stages: GateStages
               ) -> GateOutcome:
    """Record the transfer rules on ``swept`` and the gate's row.

    Raises:
        SweepStopped: ``gate_stopped``, a rule still edge/noisy/fallback after the rounds under
            ``transfer.gate`` ``widen`` or ``stop`` (rules and gate row recorded).
        FitError: a rule cannot be fitted."""
    tr = run.config.transfer
    rules, hp, settings = (stages.fitted if stages.fitted is not None and stages.states
                           else fit_rules(run, swept))
    first = stages.first_verdicts or {r["hyperparameter"]: r["verdict"] for r in rules}
    gate: dict[str, Any] = {"setting": tr.gate, "max_rounds": tr.gate_rounds,
                            "rounds": [_round_row(r) for r in stages.rounds],
                            "first_verdicts": first}
    left = gate_problems(rules)
    gate["gpu_hours"] = sum(r["gpu_hours"] for r in gate["rounds"])
    gate["final_verdicts"] = {r["hyperparameter"]: r["verdict"] for r in rules}
    for row in rules:
        run.recorder.rule_fitted(run.sweep_id, row)
    if not left:
        gate["outcome"] = "passed" if gate["rounds"] else "passed without a round"
        run.recorder.check_recorded(run.sweep_id, CheckRecord("gate", gate))
        return GateOutcome(swept, rules, hp, settings, gate)
    what = ", ".join(f"{n}: {v}" for n, v in sorted(left.items()))
    if tr.gate == "proceed":
        gate["outcome"] = "proceeded"
        gate["warning"] = (f"after {len(gate['rounds'])} gate round(s) the transfer is still "
                           f"not healthy ({what}); the target run trains anyway "
                           "(transfer.gate = proceed)")
        run.recorder.check_recorded(run.sweep_id, CheckRecord("gate", gate))
        return GateOutcome(swept, rules, hp, settings, gate)
    gate["outcome"] = "stopped"
    reason = (f"the gate stopped before the target run: {what} after "
              f"{len(gate['rounds'])} round(s) (transfer.gate = {tr.gate}, gate_rounds = "
              f"{tr.gate_rounds}); widen the range or add samples, or set transfer.gate: "
              "proceed")
    gate["reason"] = reason
    run.recorder.check_recorded(run.sweep_id, CheckRecord("gate", gate))
    raise SweepStopped("gate_stopped", reason)


def _round_row(rnd: GateRound) -> dict[str, Any]:
    hours, trials = _gpu_hours(list(rnd.outcomes.values()))
    return {"round": rnd.number, "problems": rnd.problems, "actions": rnd.actions,
            "trials": trials, "gpu_hours": hours, "verdicts": rnd.verdicts}
