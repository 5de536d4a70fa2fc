"""The confirmation design and the gate before the target run, on a synthetic loss surface.

The trials' values come from a known bowl in (log2 lr, log2 output_mult) whose minimum can be
put outside the searched range; the backend that would train the stages' groups on Ray is
replaced by one that evaluates the bowl and hands each group's outcome to the stages' follow-up,
as the Ray run does (which runs end to end in tests/pipeline/test_pipeline.py). So the gate's
decisions are checked against a known optimum, fast and seeded.
"""
from __future__ import annotations

import itertools
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from mutune.config import parse_config
from mutune.errors import SweepStopped
from mutune.pipeline.confirm_stage import design_allocation, design_points, trials_per_design
from mutune.pipeline.gate import confirm_proxies, gate_rules
from mutune.pipeline.recording import MemoryRecorder
from mutune.pipeline.stage_groups import StageGroups
from mutune.pipeline.sweep import ProxyResult, SweepRun
from mutune.search.backends.groups import RunOutcome, finished_trials
from mutune.search.backends.joining import settle
from mutune.search.backends.trial_record import TrialRecord

from tests.conftest import make_tiny_config

LR_STAR, OM_STAR = 2.0 ** -3, 2.0          # the bowl's minimum (lr outside [1e-4, 1e-2])


def _gated(out):
    """A GateOutcome's fields, in order (a shallow astuple: ProxyResults stay objects)."""
    return (out.swept, out.rules, out.target_hparams, out.settings, out.record)


def _config(**transfer):
    d = make_tiny_config().model_dump(mode="json")
    d["widths"], d["target"]["width"] = [16, 32, 64], 256
    d["search"]["space"]["lr"] = {"type": "loguniform", "low": 1e-4, "high": 1e-2}
    # a design at every width: the gate's moves are checked on each width's own design (the
    # moved widths of the default allocation: tests/pipeline/test_horizon_shift.py)
    d["transfer"].update({"confirm_replicates": 1, "confirm_center_replicates": 3,
                          "confirm_widths": "all", "n_boot": 200, "tolerance": 0.25,
                          **transfer})
    return parse_config(d)


def _loss(hp, seed, noise):
    z = (math.log2(hp["lr"]) - math.log2(LR_STAR), math.log2(hp["output_mult"])
         - math.log2(OM_STAR))
    eps = np.random.default_rng(seed).normal(0, noise)
    return 1.0 + 0.05 * z[0] ** 2 + 0.02 * z[1] ** 2 + 0.01 * z[0] * z[1] + eps


@pytest.fixture
def bowl():
    """A backend that evaluates the bowl: ``bowl.drive(stages)`` trains every group the stages
    release, in order, and hands each outcome back (``bowl.ran``: (group, points) trained)."""
    ran, ids = [], itertools.count(1000)
    state = {"noise": 0.002}

    def train(spec, max_t):
        trials = list(finished_trials(spec))
        for i, p in enumerate(spec.points):
            v = _loss(p["hparams"], p["seed"], state["noise"])
            trials.append(TrialRecord(
                key=p.get("key") or f"{spec.group}-t{i}", trial_id=next(ids), point=p,
                started=0.0, reports=[{"step": max_t, "val_loss": v, "val_loss_se": 0.001,
                                       "test_loss": v + 0.01}],
                status="completed", timing={"allocated_s": 2.0, "devices": 1}))
        if spec.points:
            ran.append((spec.group, [p["hparams"] for p in spec.points]))
        return RunOutcome(trials, None)

    def drive(stages):
        max_t = stages.run.config.search.scheduler.max_t
        queue, outcomes = settle(stages.ready(), stages.follow)
        while queue:
            spec = queue.pop(0)
            outcomes[spec.group] = train(spec, max_t)
            more, done = settle(stages.follow(spec.group, outcomes[spec.group]),
                                stages.follow)
            queue += more
            outcomes.update(done)
        stages.ran(outcomes)
        return outcomes

    return SimpleNamespace(ran=ran, state=state, drive=drive)


def _confirm(run, swept, bowl):
    """The stages of ``swept`` (every width's sweep done) trained by the bowl: (the refitted
    swept list, the confirmation states, the stages)."""
    stages = StageGroups(run, [(p.width, p.depth) for p, _ in swept])
    for p, o in swept:
        stages.rebuilt(p, o)
    bowl.drive(stages)
    return (*confirm_proxies(run, stages), stages)


def _start(config, center):
    rec = MemoryRecorder()
    run = SweepRun(config, rec, None, 1, Path("/nonexistent"), itertools.count(1))
    swept = []
    for i, w in enumerate(config.widths):
        p = ProxyResult(w, 10 + i, 1, dict(center), 1.5, 9, 4)
        swept.append((p, RunOutcome([], None)))
    return run, rec, swept


def test_design_is_a_face_centred_grid():
    pts = design_points({"lr": 0.01, "output_mult": 1.0, "wd": 0.1}, ["lr", "output_mult"], 1.0)
    assert len(pts) == 9 and all(p["wd"] == 0.1 for p in pts)
    assert sorted({round(math.log2(p["lr"] / 0.01)) for p in pts}) == [-1, 0, 1]
    assert len(design_points({"lr": 0.01}, ["lr"], 0.5)) == 5
    assert len(design_points({"a": 1.0, "b": 1.0, "c": 1.0}, ["a", "b", "c"], 1.0)) == 15
    with pytest.raises(ValueError, match="lr"):
        design_points({"lr": -1.0}, ["lr"], 1.0)


def test_design_replicates_the_centre():
    # the centre is the point with every level 0, in design_points order
    assert design_allocation(2, 1, 3) == [1, 1, 1, 1, 3, 1, 1, 1, 1]
    assert design_allocation(1, 2, 3) == [2, 2, 3, 2, 2]
    assert design_allocation(3, 2, 1)[0] == 2 and sum(design_allocation(3, 2, 1)) == 30
    with pytest.raises(ValueError, match="replicates"):
        design_allocation(2, 0, 3)
    assert trials_per_design(_config()) == 11
    assert trials_per_design(_config(confirm_replicates=0)) == 0


def test_optimum_outside_the_range_is_flagged_then_found_by_widening(bowl):
    """The sweep's best sits at the top of the lr range (1e-2); the bowl's minimum is 3.6
    octaves above. The first design cannot bracket it (edge, clipped); one widening round
    re-centres the designs 3 octaves further out and the pooled fit finds it."""
    config = _config(gate="widen", gate_rounds=1)
    run, rec, swept = _start(config, {"lr": 1e-2, "output_mult": 1.0})
    swept, states, stages = _confirm(run, swept, bowl)
    first = stages.confirmed[64].optimum
    assert first.optimum_horizon == "max_t" and first.n_trials == 11
    assert first.on_edge["lr"] and first.edge_side["lr"] == "high"
    assert first.clipped["lr"]
    n_ran = len(bowl.ran)                               # the designs, then the round
    swept, rules, hp, _, gate = _gated(gate_rules(run, swept, stages))
    assert n_ran == 6 and len(bowl.ran) == n_ran        # the gate trains nothing itself
    assert swept[-1][0].optimum.n_trials == 22
    lr = next(r for r in rules if r["hyperparameter"] == "lr")
    assert gate["first_verdicts"]["lr"] == "edge"
    assert [a["action"] for a in gate["rounds"][0]["actions"]] == ["widen"] * 3
    # each widening says what it came from: the clipped optimum, the quadratic's minimum
    # beyond it (above: the side it widens to), the best trial; and the whole new centre
    for a in gate["rounds"][0]["actions"]:
        w = a["hyperparameters"]["lr"]
        assert w["side"] == "high" and w["unclipped_center"] > w["from"] > 0
        assert w["best_trial"] > 0 and a["new_design_center"]["lr"] == w["new_center"]
        assert set(a["new_design_center"]) >= {"lr", "output_mult"}
    assert gate["rounds"][0]["trials"] == 3 * 11 and gate["rounds"][0]["gpu_hours"] > 0
    assert lr["verdict"] not in ("edge", "noisy", "fallback"), lr["reason"]
    assert abs(math.log2(hp["lr"] / LR_STAR)) < 0.5
    assert abs(math.log2(hp["output_mult"] / OM_STAR)) < 0.75
    assert gate["outcome"] == "passed"
    assert [e["check"].kind for e in rec.of("check_recorded")] == ["gate"]
    assert not rec.of("law_fitted")
    assert len(rec.of("rule_fitted")) == 2          # rules recorded once, after the gate


def test_gate_stop_does_not_act(bowl):
    config = _config(gate="stop", gate_rounds=3)
    run, rec, swept = _start(config, {"lr": 1e-2, "output_mult": 1.0})
    swept, states, stages = _confirm(run, swept, bowl)
    with pytest.raises(SweepStopped, match="gate stopped before the target run: lr: edge") \
            as err:
        gate_rules(run, swept, stages)
    assert err.value.status == "gate_stopped"
    assert len(bowl.ran) == 3 and not stages.rounds     # the designs; no round ran
    assert rec.of("check_recorded")[0]["check"].data["outcome"] == "stopped"


def test_gate_widen_stops_when_rounds_do_not_suffice_and_proceed_warns(bowl):
    # half an octave per widening cannot reach an optimum 3.6 octaves away in one round
    for setting in ("widen", "proceed"):
        config = _config(gate=setting, gate_rounds=1, widen_octaves=0.5)
        run, rec, swept = _start(config, {"lr": 1e-2, "output_mult": 1.0})
        swept, states, stages = _confirm(run, swept, bowl)
        if setting == "widen":
            with pytest.raises(SweepStopped, match="after 1 round"):
                gate_rules(run, swept, stages)
        else:
            _, rules, _, _, gate = _gated(gate_rules(run, swept, stages))
            assert gate["outcome"] == "proceeded" and "still not healthy" in gate["warning"]
            assert next(r for r in rules if r["hyperparameter"] == "lr")["verdict"] == "edge"


def test_noisy_rule_gets_replicates_on_the_same_points(bowl):
    """With the optimum inside the range but a tolerance the values cannot resolve, the
    round adds seeds to every width's first design (the same points), not new points."""
    bowl.state["noise"] = 0.01
    # pooled, the widths' optima put little loss at stake: a tolerance the values cannot meet
    config = _config(gate="proceed", gate_rounds=1, tolerance=0.01, loss_tolerance=1e-4)
    d = config.model_dump(mode="json")
    d["search"]["space"]["lr"] = {"type": "loguniform", "low": 1e-3, "high": 1.0}
    config = parse_config(d)
    run, rec, swept = _start(config, {"lr": LR_STAR, "output_mult": OM_STAR})
    swept, states, stages = _confirm(run, swept, bowl)
    swept, rules, _, _, gate = _gated(gate_rules(run, swept, stages))
    assert gate["first_verdicts"] == {"lr": "noisy", "output_mult": "noisy"}
    acts = gate["rounds"][0]["actions"]
    assert [a["action"] for a in acts] == ["replicates"] * 3
    assert bowl.ran[3][1] == bowl.ran[0][1]          # the widest design again, new seeds
    assert [(p.optimum.n_trials, p.optimum.n_seeds) for p, _ in swept] == [(22, 22)] * 3
    assert gate["outcome"] in ("passed", "proceeded")


_TIMING = ("allocated_s", "productive_s", "eval_s", "overhead_s", "steps", "samples",
           "devices", "device_kind", "restarts", "preemptions", "repeated_steps", "recovery_s",
           "checkpoint_s", "upload_s")


def _row(t):
    """A trial as the results database returns it (``Store.sweep_rows``)."""
    return {"key": t.key, "id": t.trial_id, "seed": t.point["seed"],
            "config": dict(t.point["hparams"]), "status": t.status, "reason": None,
            "checkpoint_dir": None,
            "reports": [{"step": r["step"], "metrics": {k: v for k, v in r.items()
                                                        if k != "step"}}
                        for r in t.reports],
            **{k: 0 for k in _TIMING}, "allocated_s": 2.0, "devices": 1}


def test_a_resumed_sweep_whose_stages_had_ended_trains_nothing_and_records_the_same(bowl):
    """On resume every stage is released again: a design whose trials had all ended is done
    at once (settled, no slot), so what follows it is planned from the same trials and
    released in turn; the rounds, rules, target values and optima are those of the sweep
    before. Both kinds of round: a widening (an edge) and replicates (noisy rules)."""
    noisy = _config(gate="proceed", gate_rounds=1, tolerance=0.01,
                    loss_tolerance=1e-4).model_dump(mode="json")
    noisy["search"]["space"]["lr"] = {"type": "loguniform", "low": 1e-3, "high": 1.0}
    for config, center, noise, action in (
            (_config(gate="widen", gate_rounds=1), {"lr": 1e-2, "output_mult": 1.0}, 0.002,
             "widen"),
            (parse_config(noisy), {"lr": LR_STAR, "output_mult": OM_STAR}, 0.01,
             "replicates")):
        bowl.state["noise"] = noise
        run, _, swept = _start(config, center)
        swept, _, stages = _confirm(run, swept, bowl)
        got = _gated(gate_rules(run, swept, stages))
        assert [g for g, _ in bowl.ran[-3:]] == ["c1w16", "c1w32", "c1w64"]
        n_ran = len(bowl.ran)
        run_b, _, swept_b = _start(config, center)
        run_b.recorded = {t.key: _row(t) for s in stages.states.values()
                          for o in s.designs for t in o.trials}
        swept_b, _, stages_b = _confirm(run_b, swept_b, bowl)
        want = _gated(gate_rules(run_b, swept_b, stages_b))
        assert len(bowl.ran) == n_ran                         # nothing trained again
        assert got[1:] == want[1:]                            # rules, values, settings, gate
        assert [a["action"] for a in got[4]["rounds"][0]["actions"]] == [action] * 3
        assert got[4]["rounds"][0]["trials"] == 33

        def optima(swept):
            return [{k: v for k, v in p.optimum.as_json().items() if "trial_id" not in k}
                    for p, _ in swept]
        assert optima(got[0]) == optima(want[0])


def test_later_rounds_join_when_the_round_before_is_done(bowl):
    """Half an octave per widening leaves the optimum at the edge after round 1: round 2 is
    released once round 1's designs are done, with its own seeds and group names."""
    run, _, swept = _start(_config(gate="proceed", gate_rounds=2, widen_octaves=0.5),
                           {"lr": 1e-2, "output_mult": 1.0})
    swept, states, stages = _confirm(run, swept, bowl)
    gate = gate_rules(run, swept, stages).record
    assert [r.number for r in stages.rounds] == [1, 2]
    assert [r["round"] for r in gate["rounds"]] == [1, 2]
    assert {g for g, _ in bowl.ran[-3:]} == {"c2w16", "c2w32", "c2w64"}
    assert all(len(s.designs) == 3 for s in states.values())
    assert gate["rounds"][0]["verdicts"]["lr"] == "edge"


def test_no_round_joins_when_the_gate_will_not_act(bowl):
    for transfer in ({"gate": "stop", "gate_rounds": 3}, {"gate": "widen", "gate_rounds": 0}):
        run, _, swept = _start(_config(**transfer), {"lr": 1e-2, "output_mult": 1.0})
        n_ran = len(bowl.ran)
        _, _, stages = _confirm(run, swept, bowl)
        assert stages.rounds == [] and len(bowl.ran) == n_ran + 3


def test_a_gate_round_has_a_progress_row_of_its_own():
    """The progress display keys its rows by label: a gate round's design must not move the
    first design's finished bar back."""
    from mutune.pipeline.confirm_stage import design_spec

    run, _, swept = _start(_config(gate="widen", gate_rounds=2), {"lr": 1e-2,
                                                                  "output_mult": 1.0})
    rows = []
    run.on_progress = lambda label, done, total: rows.append((label, done, total))
    p = swept[0][0]
    for round_ in (0, 1, 2):
        design_spec(run, p, 0, {"lr": 1e-2, "output_mult": 1.0}, round_=round_).on_progress(
            1, 1)
    assert [r[0] for r in rows] == ["confirm width 16", "gate round 1 width 16",
                                    "gate round 2 width 16"]
    assert all(total > 0 for _, _, total in rows)


def test_a_widening_is_shown_with_the_evidence_it_came_from():
    from mutune.services.report.render import _widened_from

    shown = _widened_from({"side": "high", "new_center": 0.0097, "from": 0.00855,
                           "unclipped_center": 0.00969, "best_trial": 0.00214})
    assert shown == " (from 0.00855; unclipped 0.00969; best trial 0.00214)"
    assert _widened_from({"side": "high", "new_center": 0.0097}) == ""   # an older record


def test_a_depth_ladder_confirms_and_widens_each_width_and_depth(bowl):
    """On a width × depth ladder every (width, depth) gets its own design with its depth's
    model (groups ``c{round}w{width}d{depth}``), and a widening round acts on each of them,
    its actions naming width and depth; the rules carry both axes."""
    from mutune.proxies.task import ProxyTask, load_task_data

    d = _config(gate="widen", gate_rounds=1).model_dump(mode="json")
    d["model"].pop("depth")
    d["model"].update(residual=True, depth_parametrization="completep", base_depth=None)
    d["depths"], d["target"]["depth"] = [1, 2], 4
    config = parse_config(d)
    task = ProxyTask(config.model, config.train, load_task_data(config)).with_base_shapes()
    rec = MemoryRecorder()
    run = SweepRun(config, rec, task, 1, Path("/nonexistent"), itertools.count(1))
    center = {"lr": 1e-2, "output_mult": 1.0}
    swept = [(ProxyResult(w, 10 + i, 1, dict(center), 1.5, 9, 4, depth=dp),
              SimpleNamespace(trials=[]))
             for i, (w, dp) in enumerate((w, dp) for dp in (1, 2) for w in (16, 32, 64))]
    swept, states, stages = _confirm(run, swept, bowl)
    assert sorted(states) == sorted((w, dp) for dp in (1, 2) for w in (16, 32, 64))
    first = [g for g, _ in bowl.ran][:6]
    assert sorted(first) == sorted(f"c0w{w}d{dp}" for dp in (1, 2) for w in (16, 32, 64))
    # a design at depth 2 builds its depth's model (its own base shapes), shipped under its
    # depth's name with the proxies of that depth
    assert run.depth_tasks[2].model.depth == 2 and run.depth_tasks[2].base_shapes
    swept, rules, hp, _, gate = _gated(gate_rules(run, swept, stages))
    (rnd,) = gate["rounds"]
    assert {(a["width"], a["depth"]) for a in rnd["actions"]} == set(states)
    assert {g for g, _ in bowl.ran[len(first):]} == {f"c1w{w}d{dp}" for w, dp in states}
    assert all(r["axes"] == ["width", "depth"] for r in rules if r.get("formula"))
    assert all(len(s.designs) == 2 for s in states.values())
    assert abs(math.log2(hp["lr"] / LR_STAR)) < 0.5
