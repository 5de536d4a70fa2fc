"""Full-horizon optima and the gate before the target run.

:func:`confirm_proxies` runs each width's confirmation design
(:mod:`mutune.pipeline.confirm_stage`) and refits its optimum on the values at ``max_t``.
:func:`gate_rules` then fits the transfer rules and, when a rule is not healthy, acts before
the one expensive run (``transfer.gate``, ``transfer.gate_rounds``; docs/transfer.md):

* ``edge`` — a width's optimum is not bracketed by what was searched: its design is re-centred
  ``transfer.widen_octaves`` beyond the clipped optimum on the side it touched (Box & Wilson
  1951's sequential move of the design towards the optimum; the new design's values are pooled
  with the old ones), at every width whose optimum is at the edge, the widest included;
* ``noisy`` or ``fallback`` — every width's first design is trained again with fresh seeds
  (``transfer.confirm_replicates`` per point, ``confirm_center_replicates`` at the centre;
  pooled), within the sweep's budget.

After the rounds a rule still ``edge``, ``noisy`` or ``fallback`` stops the sweep before the
target run (``widen``, ``stop``) or lets it go on with a warning (``proceed``). What the gate
did, and the GPU-hours it cost, is recorded as a law row of kind ``gate``.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from mutune.config.spaces import clip_valid
from mutune.errors import FitError, SweepStopped
from mutune.pipeline.sweep import ProxyResult, SweepRun, record_best

__all__ = ["confirm_proxies", "gate_rules", "plan_round", "join_first_round",
           "GATED_VERDICTS", "ConfirmState"]

#: verdicts the gate acts on (``too_few_sizes`` needs another width, not another round)
GATED_VERDICTS = ("edge", "noisy", "fallback")


@dataclasses.dataclass
class ConfirmState:
    """Per width: its sweep's outcome, its confirmation outcomes and its first design's
    centre (so replicates added later land on the same points)."""
    sweep: Any
    designs: list[Any]
    center: dict[str, float]

    @property
    def outcomes(self) -> list[Any]:
        return [self.sweep, *self.designs]


def _gpu_hours(outcomes: list[Any]) -> tuple[float, int]:
    from mutune.scaling.cost import gpu_hours

    trials = [t for o in outcomes for t in o.trials]
    return (sum(gpu_hours(t.timing.get("allocated_s", 0.0), t.timing.get("devices", 1))
                for t in trials if t.timing), len(trials))


def _refit(run: SweepRun, p: ProxyResult, state: ConfirmState, *,
           record: bool = True) -> ProxyResult:
    from mutune.pipeline.full_horizon import full_horizon_optimum

    sweep_best = p.optimum.get("sweep_best") or {
        "trial_id": p.best_trial_id, "milestone": p.milestone, "val_loss": p.best_val_loss,
        "config": p.best_config}          # the screening result, which replay reproduces
    try:
        # a categorical knob was chosen at the sweep's rung (the design keeps its choice):
        # its evidence stays with the optimum
        opt = {**full_horizon_optimum(run.config, state.outcomes, state.center),
               "sweep_best": sweep_best, "choices": p.optimum.get("choices") or {}}
    except FitError as err:
        opt = {**p.optimum, "full_horizon_error": str(err)}
        return dataclasses.replace(p, optimum=opt)
    p = dataclasses.replace(p, optimum=opt, best_val_loss=opt["best_val_loss"],
                            best_config=opt["best_config"], milestone=opt["milestone"],
                            best_trial_id=opt["best_trial_id"])
    if record:
        record_best(run, p, opt["n_trials"])
    return p


def confirm_proxies(run: SweepRun, swept: list[tuple[ProxyResult, Any]]
                    ) -> tuple[list[tuple[ProxyResult, Any]], dict[Any, ConfirmState]]:
    """Each width's confirmation design around its sweep's best configuration, and its
    optimum refitted on the values at max_t (``transfer.confirm_replicates`` 0: nothing is
    run and the rung-based optima stay).

    Returns:
        (the swept list with refitted ProxyResults, width (on a depth ladder (width,
        depth)) → :class:`ConfirmState`).
    """
    from mutune.pipeline.confirm_stage import confirm_widths, design_center

    if run.config.transfer.confirm_replicates == 0:
        return swept, {}
    # categorical knobs at the rung's choice (its names' best trials), the rest at the
    # sweep's best configuration; a design already trained in the proxy run (it joined when
    # its width was done) is kept with the centre it was trained around
    early = run.early_designs
    # (a proxy's key: its width, or (width, depth) on a depth ladder, whose designs never join
    # the proxy run)
    jobs = [(p, i, early[p.size][0] if p.size in early else design_center(run.config, p))
            for i, (p, _) in enumerate(swept)]
    todo = [j for j in jobs if j[0].size not in early]
    # every other width's design in one Ray Tune run
    ran = dict(zip([p.size for p, _, _ in todo], confirm_widths(run, todo) if todo else []))
    out, states = [], {}
    for (p, _, center), (_, o) in zip(jobs, swept):
        design = early[p.size][1] if p.size in early else ran[p.size]
        state = ConfirmState(o, [design], center)
        states[p.size] = state
        out.append((_refit(run, p, state), o))
    return out, states


def _problems(rules: list[dict[str, Any]]) -> dict[str, str]:
    """Hyperparameter → what the gate acts on: the rule's verdict when it is gated, or
    ``edge`` when any width's optimum is at the edge (even under ``too_few_sizes``, which
    outranks ``edge`` as a verdict: the optimum is censored all the same), or on a depth
    ladder the depth axis's gated verdict (``noisy along depth``)."""
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
    """``{"depth": d}`` for a depth ladder's proxy (what a gate action records beside its
    width), else nothing."""
    return {} if p.depth is None else {"depth": p.depth}


def _widen_center(run: SweepRun, p: ProxyResult, names: list[str]) -> dict[str, float]:
    """The next design's centre: every hyperparameter at the fitted quadratic's unclipped
    stationary point (where it puts the minimum beyond the data; Box & Wilson 1951's
    canonical analysis), moved at most ``widen_octaves`` past the clipped optimum on the side
    it touched; when the fit gives no direction (a weighted mean, an optimum at a searched
    bound), two design steps out, so the next design starts where this one ended."""
    import math

    opt = p.optimum
    tr = run.config.transfer
    center = {**run.config.search.fixed, **(opt.get("best_config") or p.best_config)}
    stationary = opt.get("stationary") or {}
    for n, v in opt["optimum"].items():
        if n not in stationary:
            continue
        s = stationary[n]
        if n in names:
            sign = 1.0 if opt["edge_side"].get(n) == "high" else -1.0
            if (opt.get("clipped") or {}).get(n) and s > 0:
                octaves = sign * math.log2(s / v)
            else:    # no stationary point beyond the data (a weighted mean, a bound):
                octaves = 2 * tr.confirm_step   # the next design starts where this one ended
            octaves = min(max(octaves, 0.0), tr.widen_octaves)
            center[n] = clip_valid(n, v * 2.0 ** (sign * octaves))   # β stays below 1
        else:
            center[n] = v
    return center


def _widening(p: ProxyResult, name: str, new_center: float) -> dict[str, Any]:
    """What a widen action records of one hyperparameter: the side, the new centre, and the
    evidence it came from — the optimum it widens from (clipped to its data), the estimator's
    unclipped centre (the fitted quadratic's minimum, or the weighted mean; None without
    one) and the best trial's value (in the hyperparameter's unit)."""
    opt = p.optimum
    stationary = (opt.get("stationary") or {}).get(name)
    best = (opt.get("best_config") or p.best_config).get(name)
    return {"side": opt["edge_side"][name], "new_center": new_center,
            "from": opt["optimum"].get(name),
            "unclipped_center": None if stationary is None else float(stationary),
            "best_trial": None if best is None else float(best)}


def plan_round(run: SweepRun, swept: list[tuple[ProxyResult, Any]],
               states: dict[Any, ConfirmState], bad: dict[str, str]
               ) -> tuple[list[dict[str, Any]], list[tuple[ProxyResult, int, dict[str, float]]]]:
    """What one gate round does about ``bad`` (:func:`_problems`): an ``edge`` widens the
    design of every width whose optimum is at that edge (:func:`_widen_center`); otherwise
    every width's first design is trained again with fresh seeds.

    Returns:
        (the actions recorded, the jobs :func:`~mutune.pipeline.confirm_stage.
        confirm_widths` trains: (ProxyResult, its position, the design's centre) per width).
    """
    from mutune.pipeline.confirm_stage import design_names

    tr = run.config.transfer
    continuous = set(design_names(run.config))
    edges = sorted(n for n, v in bad.items() if v == "edge" and n in continuous)
    actions, jobs = [], []
    for i, (p, _) in enumerate(swept):
        if edges:
            at_edge = [n for n in edges if p.optimum["on_edge"].get(n)]
            if not at_edge:
                continue
            center = _widen_center(run, p, at_edge)
            actions.append({"width": p.width, **_depth_of(p), "action": "widen",
                            "hyperparameters": {n: _widening(p, n, center[n])
                                                for n in at_edge},
                            "new_design_center": dict(center)})
        else:
            center = states[p.size].center
            actions.append({"width": p.width, **_depth_of(p), "action": "replicates",
                            "added_seeds_per_point": tr.confirm_replicates,
                            "added_seeds_at_center": max(tr.confirm_replicates,
                                                         tr.confirm_center_replicates)})
        jobs.append((p, i, center))
    return actions, jobs


def join_first_round(run: SweepRun, swept: list[tuple[ProxyResult, Any]],
                     designs: dict[int, tuple[dict[str, float], Any]]) -> list[Any]:
    """The gate's first round as groups that join the proxy run, once every width's first
    design is done there (``designs``: width → (centre, RunOutcome)): the optima are refitted
    (not recorded: :func:`confirm_proxies` records them after the run), the rules fitted and
    the round planned exactly as :func:`gate_rules` would after the run, so its trials take
    the slots the designs' tails leave free, on workers already started, instead of a Ray
    Tune run of their own. The plan is kept in ``run.early_round``; :func:`gate_rules` uses
    it when its own first round finds the same problems. Returns ``[]`` (the gate then runs
    after the proxy run as before) when no round is due or a fit fails.
    """
    from mutune.pipeline.confirm_stage import design_spec
    from mutune.pipeline.transfer_stage import transfer_rules

    tr = run.config.transfer
    if tr.gate == "stop" or tr.gate_rounds < 1 or tr.confirm_replicates == 0:
        return []
    states = {p.width: ConfirmState(o, [designs[p.width][1]], designs[p.width][0])
              for p, o in swept}
    refitted = [(_refit(run, p, states[p.width], record=False), o) for p, o in swept]
    try:
        rules, _, _ = transfer_rules(run.config, [p.width for p, _ in refitted],
                                     [p.optimum for p, _ in refitted])
    except (FitError, ValueError):
        return []
    bad = _problems(rules)
    if not bad:
        return []
    actions, jobs = plan_round(run, refitted, states, bad)
    specs = [design_spec(run, p, i, center, round_=1) for p, i, center in jobs]
    run.early_round = {"problems": bad, "actions": actions, "jobs": jobs,
                       "groups": {s.width: s.group for s in specs}}
    return specs


def gate_rules(run: SweepRun, swept: list[tuple[ProxyResult, Any]],
               states: dict[Any, ConfirmState]
               ) -> tuple[list[tuple[ProxyResult, Any]], list[dict[str, Any]],
                          dict[str, float], dict[str, Any], dict[str, Any]]:
    """Fit the transfer rules, let the gate act for up to ``transfer.gate_rounds`` rounds,
    and record the rules (and the gate's row).

    Returns:
        (swept after the rounds, the rule rows, the target's hyperparameters, its training
        settings, the gate's record: setting, rounds with their problems, actions, trials
        and GPU-hours, the outcome and any warning).
    Raises:
        SweepStopped: ``gate_stopped``, a rule is still edge/noisy/fallback after the rounds
            and ``transfer.gate`` is ``widen`` or ``stop`` (rules and gate row recorded).
        FitError: a rule cannot be fitted.
    """
    from mutune.pipeline.confirm_stage import confirm_widths
    from mutune.pipeline.transfer_stage import transfer_rules

    config = run.config
    tr = config.transfer
    widths = [p.width for p, _ in swept]
    depths = [p.depth for p, _ in swept] if config.depth_ladder else None

    def fit() -> tuple[list[dict[str, Any]], dict[str, float], dict[str, Any]]:
        return transfer_rules(config, widths, [p.optimum for p, _ in swept], depths)

    rules, hp, settings = fit()
    gate: dict[str, Any] = {"kind": "gate", "setting": tr.gate, "max_rounds": tr.gate_rounds,
                            "rounds": [], "first_verdicts": {r["hyperparameter"]: r["verdict"]
                                                              for r in rules}}
    rounds = tr.gate_rounds if tr.gate != "stop" and states else 0
    for rnd in range(1, rounds + 1):
        bad = _problems(rules)
        if not bad:
            break
        before = _gpu_hours([d for s in states.values() for d in s.designs])
        early = run.early_round if rnd == 1 else None
        if early is not None and early["problems"] == bad:
            # it joined the proxy run once every design was done (the same inputs, so the
            # same plan: :func:`join_first_round`); its trials are trained already
            actions, jobs, designs = early["actions"], early["jobs"], dict(early["outcomes"])
        else:
            actions, jobs = plan_round(run, swept, states, bad)
            # every width this round acts on: its design in one Ray Tune run
            designs = dict(zip((p.size for p, _, _ in jobs),
                               confirm_widths(run, jobs, round_=rnd) if jobs else []))
        new = []
        for p, o in swept:
            if p.size in designs:
                states[p.size].designs.append(designs[p.size])
                p = _refit(run, p, states[p.size])
            new.append((p, o))
        swept = new
        rules, hp, settings = fit()
        after = _gpu_hours([d for s in states.values() for d in s.designs])
        gate["rounds"].append({"round": rnd, "problems": bad, "actions": actions,
                               "trials": after[1] - before[1],
                               "gpu_hours": after[0] - before[0],
                               "verdicts": {r["hyperparameter"]: r["verdict"] for r in rules}})
    left = _problems(rules)
    gate["gpu_hours"] = sum(r["gpu_hours"] for r in gate["rounds"])
    gate["final_verdicts"] = {r["hyperparameter"]: r["verdict"] for r in rules}
    for row in rules:
        run.recorder.rule_fitted(run.sweep_id, row)
    if not left:
        gate["outcome"] = "passed" if gate["rounds"] else "passed without a round"
        run.recorder.law_fitted(run.sweep_id, gate)
        return swept, rules, hp, settings, gate
    what = ", ".join(f"{n}: {v}" for n, v in sorted(left.items()))
    if tr.gate == "proceed":
        gate["outcome"] = "proceeded"
        gate["warning"] = (f"after {len(gate['rounds'])} gate round(s) the transfer is still "
                           f"not healthy ({what}); the target run trains anyway "
                           "(transfer.gate = proceed)")
        run.recorder.law_fitted(run.sweep_id, gate)
        return swept, rules, hp, settings, gate
    gate["outcome"] = "stopped"
    reason = (f"the gate stopped before the target run: {what} after "
              f"{len(gate['rounds'])} round(s) (transfer.gate = {tr.gate}, gate_rounds = "
              f"{tr.gate_rounds}); widen the range or add samples, or set transfer.gate: "
              "proceed")
    gate["reason"] = reason
    run.recorder.law_fitted(run.sweep_id, gate)
    raise SweepStopped("gate_stopped", reason)
