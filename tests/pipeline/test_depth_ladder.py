"""The depth ladder: its config rules, rules over width and depth, and the main job end to end
at every (width, depth) with the target at its own depth (real Ray, a real database)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mutune.config import load_config, parse_config
from mutune.errors import ConfigError
from mutune.pipeline.transfer_stage import transfer_rules
from mutune.pipeline.optimum_record import WidthOptimum
from tests.conftest import MLP_DIGITS


def typed(optima):
    return [WidthOptimum.from_json(o) for o in optima]


def _ladder(**over):
    """The MLP example as a residual-MLP ladder: widths 64/128/256 × depths 2/4/8."""
    d = load_config(MLP_DIGITS).model_dump(mode="json")
    d["model"].pop("depth")
    d["model"].update(residual=True, depth_parametrization="completep")
    d["depths"] = [2, 4, 8]
    d["target"]["depth"] = 16
    d["search"]["space"] = {"lr": d["search"]["space"]["lr"]}
    d["transfer"].update(n_boot=200, confirm_replicates=0)
    for path, v in over.items():
        node = d
        *head, last = path.split(".")
        for k in head:
            node = node[k]
        if v is None:
            node.pop(last, None)
        else:
            node[last] = v
    return d


def test_the_model_section_describes_the_smallest_proxy():
    cfg = parse_config(_ladder())
    assert cfg.model.depth == 2 and cfg.model.base_depth == 2
    assert cfg.proxy_depths == [2, 4, 8] and cfg.depth_ladder and cfg.target_depth == 16
    # a dumped config parses to the same (the server and the database keep the dump)
    assert parse_config(cfg.model_dump(mode="json")) == cfg
    plain = parse_config(_ladder(depths=None, **{"target.depth": None}))
    assert not plain.depth_ladder and plain.proxy_depths == [2] and plain.target_depth == 2


def test_the_checks_across_depth_take_a_ladder_config():
    """``mutune transfer-check --axis depth`` on a ladder's config builds one model per
    (parametrization, depth): the ladder's own depths and target depth do not apply there."""
    from mutune.pipeline.depth_check import depth_configs

    built = depth_configs(parse_config(_ladder()), [2, 4])
    assert {k: (c.model.depth, c.model.base_depth, c.depths) for k, c in built.items()} == {
        (p, dp): (dp, 2, None) for p in ("completep", "depth_mup", "none") for dp in (2, 4)}


@pytest.mark.parametrize("over, field, rule", [
    # the two cases: a target depth against one proxy depth, a base above the smallest
    ({"depths": None, "target.depth": 8}, "target.depth",
     "target.depth (8) differs from the only proxy depth, model.depth (2)"),
    ({"depths": [4], "target.depth": 8}, "target.depth",
     "target.depth (8) differs from the only proxy depth (4, depths)"),
    ({"model.base_depth": 4}, "model.base_depth", "above depth = 2"),
    ({"model.depth": 4, "model.base_depth": 4}, "model.depth",
     "model.depth (4) differs from the smallest proxy depth in depths (2)"),
    ({"target.depth": None}, "target.depth", "target.depth is required with a depth ladder"),
    ({"target.depth": 4}, "target.depth", "must be >= the deepest proxy depth (8)"),
    ({"depths": [4, 2]}, "depths", "strictly increasing"),
])
def test_ladder_errors_name_field_value_and_rule(over, field, rule):
    with pytest.raises(ConfigError) as err:
        parse_config(_ladder(**over))
    assert any(e["field"] == field and rule in e["rule"] for e in err.value.errors), \
        err.value.errors


def _optima(values, rel=0.15):
    return [{"optimum": {"lr": v}, "interval": {"lr": [v * (1 - rel), v * (1 + rel)]},
             "on_edge": {"lr": False}, "edge_side": {"lr": None}} for v in values]


def _grid(b, c, a=-6.0, widths=(64, 128, 256), depths=(2, 4, 8), noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    ws = [w for d in depths for w in widths]
    ds = [d for d in depths for _ in widths]
    lrs = [math.exp(a + b * math.log(w) + c * math.log(d) + noise * rng.standard_normal())
           for w, d in zip(ws, ds)]
    return ws, ds, lrs


def test_rules_over_width_and_depth_carry_every_axis():
    """A known rule (b = 0 along width, c = −0.5 along depth, as without a depth
    parametrization) is recovered from synthetic optima, each axis judged on its own, and the
    target's value comes from the depth term at the target depth."""
    cfg = parse_config(_ladder(**{"model.depth_parametrization": "none",
                                  "model.residual": True}))
    ws, ds, lrs = _grid(0.0, -0.5, noise=0.02)
    rules, hp, _ = transfer_rules(cfg, ws, typed(_optima(lrs)), ds)
    (r,) = rules
    assert r["axes"] == ["width", "depth"]
    assert r["slopes"]["width"] == pytest.approx(0.0, abs=0.05)
    assert r["slopes"]["depth"] == pytest.approx(-0.5, abs=0.05)
    for axis in ("width", "depth"):
        lo, hi = r["slope_intervals"][axis]
        assert lo <= r["slopes"][axis] <= hi
    assert r["slope"] == r["slopes"]["width"] and r["slope_interval"] == \
        r["slope_intervals"]["width"]
    assert r["verdict"] == r["verdicts"]["width"] == "stable"
    # no depth parametrization: the depth exponent is the correction, used to extrapolate
    assert r["verdicts"]["depth"] == "sp_corrected"
    assert r["depths"] == ds and r["target_depth"] == 16
    assert "power law in depth" in r["transfer_form"] and "flat in width" in r["transfer_form"]
    # width flat (μP, stable): evaluated at the widest proxy; depth at the target's 16
    expect = math.exp(-6.0 - 0.5 * math.log(16))
    assert r["transferred_value"] == pytest.approx(expect, rel=0.1)
    assert hp["lr"] == pytest.approx(r["transferred_value"])
    lo, hi = r["transferred_interval"]
    assert lo < r["transferred_value"] < hi
    assert "log depth" in r["formula"] and r["formula"].startswith("log lr*(w, depth)")


def test_a_depth_parametrization_keeps_a_stable_depth_exponent_flat():
    """With CompleteP a depth exponent inside the tolerance is not extrapolated: the target
    takes the widest, deepest proxy's optimum."""
    cfg = parse_config(_ladder())
    ws, ds, lrs = _grid(0.0, 0.0, noise=0.01, seed=3)
    (r,), hp, _ = transfer_rules(cfg, ws, typed(_optima(lrs, rel=0.05)), ds)
    assert r["verdicts"] == {"width": "stable", "depth": "stable"}
    assert r["transfer_form"].startswith("flat: the widest, deepest proxy's optimum")
    assert r["transferred_value"] == pytest.approx(lrs[-1])


def test_two_depths_cannot_resolve_the_depth_exponent():
    cfg = parse_config(_ladder(depths=[2, 4]))
    ws, ds, lrs = _grid(0.0, 0.0, depths=(2, 4), noise=0.01)
    (r,), _, _ = transfer_rules(cfg, ws, typed(_optima(lrs)), ds)
    assert r["verdicts"]["depth"] == "too_few_sizes"
    assert r["transfer_form"].startswith("flat")


@pytest.mark.slow
def test_main_job_on_a_width_by_depth_ladder(ray_local, tiny_config, one_store_url, tmp_path):
    """Every (width, depth) is a proxy of its own in one Ray Tune run, then has its own
    confirmation design at max_t; the rules carry both axes; the target trains (and is
    kept) at its own depth; the ledger counts each model's FLOPs at its depth; the report,
    the export and the replay name each proxy's depth."""
    import mutune
    from mutune.pipeline.target_loader import load_target_model
    from mutune.services.store import Store
    from mutune.services.stored_replay import replay_sweep

    d = tiny_config.model_dump(mode="json")
    d["model"].pop("depth")
    d["model"].update(residual=True, depth_parametrization="completep", base_depth=None)
    d["depths"], d["target"]["depth"] = [1, 2], 4
    d["search"]["num_samples"] = 6
    d["transfer"].update(gate="proceed", n_boot=200)    # a 3 × 3 design per (width, depth)
    # ranges where every sample learns in 27 steps: the test is about the ladder's mechanics,
    # and a target the watch stops as diverged keeps no model to reload
    d["search"]["space"] = {"lr": {"type": "loguniform", "low": 2e-3, "high": 1e-2},
                            "output_mult": {"type": "loguniform", "low": 16.0, "high": 128.0}}
    cfg = parse_config(d)
    assert cfg.transfer.confirm_replicates == 1
    result = mutune.run(cfg, db=one_store_url, out_dir=tmp_path / "out", progress=False)
    rep = json.loads(result.report_path.read_text())
    assert [(p["width"], p["depth"]) for p in rep["proxies"]] == [(16, 1), (16, 2), (32, 1),
                                                                  (32, 2)]
    assert all(p["trials"] == 6 for p in rep["proxies"])
    # each (width, depth)'s optimum rests on its own confirmation design at max_t (its depth's
    # model): 9 points, one seed each
    for p in rep["proxies"]:
        assert p["confirm_trials"] == 9
        assert p["optimum"]["optimum_horizon"] == "max_t" and p["optimum"]["milestone"] == 27
    for r in rep["rules"]:
        assert r["axes"] == ["width", "depth"]
        assert set(r["slopes"]) == set(r["slope_intervals"]) == set(r["verdicts"]) == \
            {"width", "depth"}
        # two widths and two depths: neither exponent has an interval worth a verdict
        assert r["verdicts"] == {"width": "too_few_sizes", "depth": "too_few_sizes"}
        assert r["depths"] == [1, 1, 2, 2] and r["widths"] == [16, 32, 16, 32]
    assert rep["target"]["width"] == 64 and rep["target"]["depth"] == 4
    assert rep["target"]["val_loss"] < math.log(10)
    sid = rep["sweep_id"]
    with Store.open(one_store_url) as store:
        rows = store.sweep_rows(sid)
        replay = replay_sweep(store, sid)
    keys = {t["key"].split("-")[0] for t in rows["trials"] if t["kind"] == "proxy"}
    assert keys == {"w16d1", "w16d2", "w32d1", "w32d2"}
    designs = {t["key"].split("-")[0] for t in rows["trials"] if t["kind"] == "confirm"}
    assert designs == {"c0w16d1", "c0w16d2", "c0w32d1", "c0w32d2"}
    # a design trains its own (width, depth)'s model, and the ledger prices its FLOPs so
    by_key = {t["key"]: t["id"] for t in rows["trials"]}
    per_step = {e["trial_id"]: e["value"] for e in rows["ledger"]
                if e["scope"] == "trial" and e["name"] == "flops_per_step"}
    assert per_step[by_key["c0w32d2-t0"]] == pytest.approx(per_step[by_key["w32d2-t0"]])
    assert per_step[by_key["c0w32d2-t0"]] > per_step[by_key["c0w32d1-t0"]]
    # one Ray Tune experiment for every proxy (all its groups) and their designs, which
    # joined it with their depth's model; one for the target
    ray_dirs = sorted(p.name for p in (tmp_path / "out" / f"sweep-{sid}" / "ray").iterdir()
                      if p.is_dir() and p.name.startswith("sweep"))
    assert ray_dirs == [f"sweep{sid}-target", f"sweep{sid}-w16d1-w32d1-w16d2-w32d2"]
    assert rep["target"]["status"] == "completed", rep["target"]
    # the kept target is rebuilt at its depth (4 residual blocks), with its own base shapes
    model, _, info = load_target_model(rep["target"]["model_dir"])
    assert info["meta"]["depth"] == 4 and info["task"].model.depth == 4
    assert len(model.hidden) == 4
    # the target's parameter count is its own depth's: 3 more width × width blocks than at 1
    trials = {t["id"]: t for t in rows["trials"]}
    flops = {e["trial_id"]: e for e in rows["ledger"]
             if e["scope"] == "trial" and e["name"] == "flops_per_step"}
    target_params = flops[rows["target"]["trial_id"]]["inputs"]["n_params"]
    w32d1 = next(e["inputs"]["n_params"] for tid, e in flops.items()
                 if trials[tid]["key"].startswith("w32d1-"))
    w32d2 = next(e["inputs"]["n_params"] for tid, e in flops.items()
                 if trials[tid]["key"].startswith("w32d2-"))
    assert w32d2 - w32d1 == 32 * 32              # one more residual block at width 32
    assert target_params > 3 * 64 * 64
    # the export re-fits the rules over width and depth from the stored optima: at the
    # target's (width, depth) it gives the target run's hyperparameters
    from mutune.services.export.hparams import export_hparams
    exported = export_hparams(rows, width=64)
    assert exported["depth"] == 4 and exported["model"]["proxy_depths"] == [1, 1, 2, 2]
    assert exported["model"]["proxy_widths"] == [16, 32, 16, 32]
    assert exported["hyperparameters"] == pytest.approx(rep["target"]["config"])
    assert all(r["axes"] == ["width", "depth"] for r in exported["rules"])
    # the snippet builds the user's model with CompleteP's branch multiplier and gives each
    # layer group its lr and ε factors (depth 4 over base depth 1: branches × 1/4, ε × 1/4)
    dp = exported["depth_parametrization"]
    assert dp["kind"] == "completep" and dp["branch_multiplier"] == pytest.approx(0.25)
    from mutune.proxies.mlp import MuMLP

    def build(width, depth, **mults):
        return MuMLP.from_options(64, width, 10, depth=depth, residual=True, **mults)

    scope = {"build": build}
    exec(compile(exported["snippet"], "snippet", "exec"), scope)
    model, opt = scope["model"], scope["optimizer"]
    assert model.branch_mult == pytest.approx(0.25) and len(model.hidden) == 4
    lr = exported["hyperparameters"]["lr"]
    assert all(g["eps"] == pytest.approx(0.25 * 1e-8) for g in opt.param_groups)
    assert max(g["lr"] for g in opt.param_groups) == pytest.approx(lr)
    assert sorted((w["width"], w["depth"]) for w in replay["widths"]) == \
        [(16, 1), (16, 2), (32, 1), (32, 2)]
    assert all(w["matches_original"] for w in replay["widths"])


@pytest.mark.slow
def test_an_interrupted_ladder_resumes_proxy_by_proxy(ray_local, tiny_config, tmp_path):
    """The driver dies inside the second (width, depth)'s sweep; ``mutune resume`` finds each
    proxy sweep by its width and depth, rebuilds the finished one, continues the interrupted
    one at its own depth, sweeps the rest and trains the target at its depth."""
    import time

    from mutune.pipeline import run_pipeline
    from mutune.services.api import resume
    from mutune.services.store import Store

    from tests.pipeline.test_resume import DyingRecorder

    d = tiny_config.model_dump(mode="json")
    d["model"].pop("depth")
    d["model"].update(residual=True, depth_parametrization="completep", base_depth=None)
    d["depths"], d["target"]["depth"] = [1, 2], 4
    d["transfer"].update(confirm_replicates=0, gate="proceed", n_boot=200)
    d["ray"].update(max_concurrent_trials=1, heartbeat_s=0.2, lease_s=3.0)
    d["train"]["checkpoint_every"] = 6
    cfg = parse_config(d)
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with Store.open(url) as store:
        with pytest.raises(Exception):  # noqa: B017 - Ray wraps DriverKilled
            # the driver dies once trial 5's report at step 9 is written (widest first,
            # deepest first at concurrency 1: w32d2 holds trials 1–4, w32d1 begins with 5)
            run_pipeline(cfg, DyingRecorder(store, lambda name, args, kw: name ==
                                            "trial_reported" and args[0] == 5
                                            and args[1] == 9), out_dir=tmp_path / "l")
        rows = store.sweep_rows(1)
    # every proxy sweep row was written up front (its depth in its settings); w32d2's four
    # trials had ended, w32d1's first was training
    assert sorted((p["width"], p["settings"]["depth"]) for p in rows["proxy_sweeps"]) == \
        [(16, 1), (16, 2), (32, 1), (32, 2)]
    status = {t["key"]: t["status"] for t in rows["trials"]}
    assert sum(k.startswith("w32d2-") and v != "running" for k, v in status.items()) == 4
    assert status.get("w32d1-t0") == "running"
    time.sleep(cfg.ray.lease_s + 0.2)
    report = resume(1, db=url, out_dir=tmp_path / "l").report
    assert report["status"] == "completed"
    assert [(p["width"], p["depth"], p["trials"]) for p in report["proxies"]] == \
        [(16, 1, 4), (16, 2, 4), (32, 1, 4), (32, 2, 4)]
    assert report["target"]["depth"] == 4
    assert all(r["axes"] == ["width", "depth"] for r in report["rules"])
    with Store.open(url) as store:
        rows = store.sweep_rows(1)
    # one proxy sweep row per (width, depth): the resume found them, it did not start anew
    assert sorted((p["width"], p["settings"]["depth"]) for p in rows["proxy_sweeps"]) == \
        [(16, 1), (16, 2), (32, 1), (32, 2)]
    assert sum(t["kind"] == "proxy" for t in rows["trials"]) == 16
    stale = [t for t in rows["trials"] if t["restarts"]]
    assert len(stale) == 1 and stale[0]["key"].startswith("w32d1-")


def test_the_dry_run_plans_every_width_and_depth(tiny_config):
    """``mutune run --dry-run`` times each (width, depth) with its depth's model and the
    target at its own depth, and gives every proxy its design."""
    from mutune.pipeline.dry_run import plan_sweep

    d = tiny_config.model_dump(mode="json")
    d["model"].pop("depth")
    d["model"].update(residual=True, depth_parametrization="completep", base_depth=None)
    d["depths"], d["target"]["depth"] = [1, 4], 8
    plan = plan_sweep(parse_config(d), overhead_s=1.0, on_ray=False)
    assert [(x["width"], x["depth"]) for x in plan["widths"]] == [(16, 1), (32, 1), (16, 4),
                                                                  (32, 4)]
    assert all(x["confirm_trials"] == 9 for x in plan["widths"])
    assert plan["target"]["width"] == 64 and plan["target"]["depth"] == 8
    # the target's parameters are its depth's: 8 width × width blocks plus input and readout
    assert plan["target"]["n_params"] > 8 * 64 * 64
    assert plan["gate"]["trials_max"] == 0        # the tiny config runs no gate round


def test_the_horizon_is_one_more_axis_of_the_lr_rule():
    """With ``transfer.horizon: extrapolate`` the lr rule also carries the horizon: d of
    log lr* = a + b·log w + c·log L + d·log T, fitted jointly on every proxy's per-rung optima
    (Bjorck et al. 2025: lr* falls with the horizon), recovered here from a known law."""
    cfg = parse_config(_ladder(**{"transfer.horizon": "extrapolate"}))
    ws, ds, _ = _grid(0.0, 0.0)
    rungs = [20, 60, 180]
    optima = []
    for _ in zip(ws, ds):
        per_rung = [math.exp(-6.0 - 0.3 * math.log(t)) for t in rungs]
        o = _optima([per_rung[-1]])[0]
        o["horizon"] = {"rungs": rungs, "optimum_lr_per_rung": per_rung,
                        "extrapolated_lr": math.exp(-6.0 - 0.3 * math.log(cfg.target_steps))}
        optima.append(o)
    (r,), _, _ = transfer_rules(cfg, ws, typed(optima), ds)
    assert r["axes"] == ["width", "depth", "steps"]
    assert r["slopes"]["steps"] == pytest.approx(-0.3, abs=1e-6)
    lo, hi = r["slope_intervals"]["steps"]
    assert lo <= -0.3 <= hi
    assert r["verdicts"]["steps"] == "sp_corrected"
    assert "fitted steps exponent b = -0.300" in r["verdict_reasons"]["steps"]
    pred = r["horizon_prediction"]
    assert pred["points"] == 9 * 3
    assert pred["value"] == pytest.approx(math.exp(-6.0 - 0.3 * math.log(cfg.target_steps)),
                                          rel=1e-6)
    assert r["optimum_source"] == "horizon-extrapolated"
