"""Using a sweep's result elsewhere and knowing what it will cost: ``export --hparams``, the
dry run against a real short run, and a budget that cuts a sweep short (real Ray, real
SQLite)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from mutune.services.cli import app
from mutune.services.store import Store
from tests.conftest import make_tiny_config

# one test process for this module: its module-scoped fixture is built once (pyproject's
# --dist loadgroup)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("pipeline.test_user_work")]
ENV = {"COLUMNS": "200"}


@pytest.fixture(scope="module")
def tiny_run(ray_local, tmp_path_factory):
    """One real main-job run of the tiny config: (config, result, db url)."""
    from mutune.services.api import run

    tmp = tmp_path_factory.mktemp("tiny_run")
    cfg = make_tiny_config()
    url = f"sqlite:///{tmp / 'run.db'}"
    return cfg, run(cfg, db=url, out_dir=tmp / "out"), url


def test_export_hparams_at_the_target_width_gives_the_target_run_config(tiny_run, tmp_path):
    cfg, result, url = tiny_run
    out = CliRunner().invoke(app, ["export", str(result.sweep_id), "--db", url, "--hparams",
                                   "--width", str(cfg.target.width)], env=ENV)
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["width"] == cfg.target.width and data["depth"] == cfg.model.depth
    assert data["hyperparameters"] == pytest.approx(result.target["config"], rel=1e-12)
    by_name = {r["hyperparameter"]: r for r in data["rules"]}
    for rule in result.rules:
        mine = by_name[rule["hyperparameter"]]
        assert mine["verdict"] == rule["verdict"] and mine["slope"] == pytest.approx(
            rule["slope"])
        assert mine["formula"] == rule["formula"]
    assert data["optimizer"]["class"] == "mup.optim.MuAdamW"
    assert data["optimizer"]["lr"] == pytest.approx(result.target["config"]["lr"])

    # another shape, YAML to a file: a different depth is flagged, the snippet runs
    path = tmp_path / "h.yaml"
    out = CliRunner().invoke(app, ["export", str(result.sweep_id), "--db", url, "--hparams",
                                   "--width", "512", "--depth", "4", "--format", "yaml",
                                   "--out", str(path)], env=ENV)
    assert out.exit_code == 0, out.output
    data = yaml.safe_load(path.read_text())
    assert data["width"] == 512 and data["depth"] == 4
    assert any("depth 4 is not covered" in w for w in data["warnings"])
    import mup
    import torch

    from mutune.proxies.mlp import MuMLP

    def build(width, depth, **mults):
        return MuMLP.from_options(64, width, 10, depth=depth, **mults)

    scope = {"build": build}
    exec(compile(data["snippet"], "snippet", "exec"), scope)   # the user's own trainer
    opt = scope["optimizer"]
    assert isinstance(opt, mup.optim.MuAdamW.__wrapped__ if hasattr(
        mup.optim.MuAdamW, "__wrapped__") else torch.optim.AdamW)
    assert scope["model"].readout.weight.infshape.width_mult() == 512 / cfg.model.base_width
    lrs = sorted({g["lr"] for g in opt.param_groups})
    assert lrs[-1] == pytest.approx(data["hyperparameters"]["lr"])       # vector-like params
    assert lrs[0] == pytest.approx(data["hyperparameters"]["lr"] * cfg.model.base_width / 512)

    out = CliRunner().invoke(app, ["export", str(result.sweep_id), "--db", url, "--hparams"],
                             env=ENV)
    assert out.exit_code == 2 and "--width" in out.output


def test_the_trained_target_is_kept_exported_and_reloads_bit_for_bit(tiny_run, tmp_path):
    """The target's trained model stays in the sweep's storage (report.json and the DB name
    its folder); ``mutune export --model`` copies it with load_model.py; reloaded, it gives
    the recorded validation loss exactly (CPU, one thread, the same evaluation windows), and
    its μP optimizer comes back with its state to train further."""
    import subprocess
    import sys

    import torch

    from mutune.pipeline.target_loader import load_target_model

    cfg, result, url = tiny_run
    report = json.loads(result.report_path.read_text())
    kept = Path(report["target"]["model_dir"])
    assert kept.is_dir() and kept.parent == result.report_path.parent
    assert kept.name == f"target_model-sweep{result.sweep_id}"     # one folder per sweep
    with Store.open(url) as store:
        rows = store.sweep_rows(result.sweep_id)
    assert rows["target"]["model_dir"] == str(kept)
    # the trained target is on disk once: its trial's checkpoints were released when the
    # kept folder was written, and the report's kept bytes are that folder's
    assert not list((result.report_path.parent / "ray").rglob("checkpoint_*"))
    assert report["cost"]["checkpoint_bytes_kept"] == sum(
        f.stat().st_size for f in kept.rglob("*") if f.is_file())
    dest = tmp_path / "exported"
    out = CliRunner().invoke(app, ["export", str(result.sweep_id), "--db", url, "--model",
                                   str(dest)], env=ENV)
    assert out.exit_code == 0, out.output
    assert {"model.pt", "model.json", "base_shapes.bsh", "load_model.py"} <= {
        p.name for p in dest.iterdir()}
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model, opt, info = load_target_model(dest, optimizer=True)
        val, _ = info["task"].evaluate(model, "val")
    finally:
        torch.set_num_threads(old)
    assert val == report["target"]["val_loss"] == rows["target"]["val_loss"]     # bit for bit
    assert info["meta"]["step"] == cfg.target_steps
    assert info["meta"]["hyperparameters"] == result.target["config"]
    assert opt.state_dict()["state"]                # Adam moments restored
    assert model.readout.weight.infshape.width_mult() == cfg.target.width / cfg.model.base_width
    run_snippet = subprocess.run([sys.executable, str(dest / "load_model.py")],
                                 capture_output=True, text=True, timeout=300)
    assert run_snippet.returncode == 0, run_snippet.stderr
    assert f"validation loss {val!r}" in run_snippet.stdout
    again = CliRunner().invoke(app, ["export", str(result.sweep_id), "--db", url, "--model",
                                     str(dest)], env=ENV)
    assert again.exit_code == 2 and "not empty" in again.output
    # a folder that holds another sweep's model (an older layout, one folder per --out) is
    # refused, never exported under this sweep's name
    import shutil

    from mutune.errors import StoreError
    from mutune.services.export.model import export_model

    other = tmp_path / "other_model"
    shutil.copytree(kept, other)
    meta = json.loads((other / "model.json").read_text())
    (other / "model.json").write_text(json.dumps({**meta, "sweep_id": result.sweep_id + 1}))
    moved = {**rows, "target": {**rows["target"], "model_dir": str(other)}}
    with pytest.raises(StoreError, match=f"now holds sweep {result.sweep_id + 1}'s model"):
        export_model(moved, tmp_path / "never")
    assert not (tmp_path / "never").exists()


def test_dry_run_figures_match_a_real_run_in_order_of_magnitude(tiny_run, tmp_path):
    cfg, result, url = tiny_run
    config_path = tmp_path / "tiny.yaml"
    planned = cfg.model_dump(mode="json")
    planned["transfer"]["gate_rounds"] = 2        # priced as a maximum; the run had none
    config_path.write_text(yaml.safe_dump(planned))
    plan_path = tmp_path / "plan.json"
    db = tmp_path / "untouched.db"
    # these trials are 27 steps of a width-32 MLP, so the per-trial overhead dominates them:
    # the dry run's default (0.25 s) against the 0.1–0.4 s a real trial costs here, the
    # workers' start spread over the trials (1.0 s, the value this test used to pass, is ten
    # times a fast day's real overhead, and the ratio left the band)
    out = CliRunner().invoke(app, ["run", str(config_path), "--dry-run", "--db",
                                   f"sqlite:///{db}", "--plan-json", str(plan_path)], env=ENV)
    assert out.exit_code == 0, out.output
    assert "nothing was trained" in out.output and "naive" in out.output
    assert not db.exists()                                      # nothing recorded
    plan = json.loads(plan_path.read_text())
    assert [w["width"] for w in plan["widths"]] == cfg.widths
    assert all(w["trials"] == cfg.search.num_samples for w in plan["widths"])
    assert plan["target"]["steps"] == cfg.target_steps
    # the real figures are measured, so a loaded machine (two test processes, an hour's
    # drift) makes every real trial several times slower than the plan assumes. Proxies,
    # target and their total are measured alike: each within 30x of the plan, and their
    # proportions within 3x. The real naive figure extrapolates the target's measured cost,
    # start overhead included, to every naive trial, so it is checked against the target's
    # ratio, which load does not move, never on its own
    real = result.cost
    keys = ("proxy_gpu_hours", "target_gpu_hours", "total_gpu_hours", "naive_gpu_hours")
    ratios = {key: plan[key] / real[key] for key in keys}
    print("dry-run / real:", json.dumps(ratios))
    measured_alike = [ratios[k] for k in keys[:3]]
    assert all(1 / 30 < r < 30 for r in measured_alike), ratios
    assert max(measured_alike) / min(measured_alike) < 3, ratios
    assert 1 / 30 < ratios["naive_gpu_hours"] / ratios["target_gpu_hours"] < 3, ratios
    trials = Store.open(url).sweep_rows(result.sweep_id)["trials"]
    real_steps = {p["width"]: sum(t["steps"] for t in trials if t["width"] == p["width"]
                                  and t["kind"] == "proxy") for p in result.proxies}
    for w in plan["widths"]:
        assert 0.25 < w["steps"] / real_steps[w["width"]] <= 1.0 + 1e-9
        # the confirmation design is priced as run: 9 points × 1 seed at this width
        assert w["confirm_trials"] == 9 == sum(t["width"] == w["width"]
                                               and t["kind"] == "confirm" for t in trials)
    # the gate's rounds are priced as a maximum beside the total
    assert plan["gate"] == {"setting": "proceed", "max_rounds": 2, "trials_max": 2 * 2 * 9}
    assert plan["gate_gpu_hours_max"] == pytest.approx(
        2 * sum(w["confirm_gpu_hours"] for w in plan["widths"]))
    assert plan["total_gpu_hours_max"] == pytest.approx(plan["total_gpu_hours"]
                                                        + plan["gate_gpu_hours_max"])


def test_dry_run_prices_replicate_seeds_of_the_proxy_trials(tiny_config, monkeypatch):
    """search.replicates R: each proxy trial trains R models in lockstep, so its steps,
    evaluations and build cost R times (the confirmation and target runs are one seed)."""
    import mutune.pipeline.dry_run as dry
    from mutune.config import parse_config

    timing = {"setup_s": 0.5, "s_per_step": 0.01, "s_per_eval": 0.2, "warmup_s": 1.0}
    monkeypatch.setattr(dry, "_warmup", lambda *a, **k: dict(timing))
    plans = {}
    for r in (1, 3):
        d = tiny_config.model_dump(mode="json")
        d["search"]["replicates"] = r
        plans[r] = dry.plan_sweep(parse_config(d), overhead_s=1.0)
    for w1, w3 in zip(plans[1]["widths"], plans[3]["widths"]):
        assert w3["replicates"] == 3 and w1["trials"] == w3["trials"]
        work = w1["steps"] * 0.01 + w1["evals"] * 0.2 + w1["trials"] * 0.5
        sweep1 = w1["gpu_hours"] - w1["confirm_gpu_hours"]
        sweep3 = w3["gpu_hours"] - w3["confirm_gpu_hours"]
        assert sweep3 - sweep1 == pytest.approx(2 * work / 3600)
        assert w3["confirm_gpu_hours"] == pytest.approx(w1["confirm_gpu_hours"])
    assert plans[3]["target_gpu_hours"] == pytest.approx(plans[1]["target_gpu_hours"])


def test_dry_run_prices_each_reports_round_trip_to_the_driver(tiny_config, monkeypatch):
    """report_s is added per report (evaluation) of every planned trial — sweep, design and
    target — beside the per-trial overhead; the plan states it."""
    import mutune.pipeline.dry_run as dry

    timing = {"setup_s": 0.5, "s_per_step": 0.01, "s_per_eval": 0.2, "warmup_s": 1.0}
    monkeypatch.setattr(dry, "_warmup", lambda *a, **k: dict(timing))
    base = dry.plan_sweep(tiny_config, overhead_s=1.0, report_s=0.0)
    more = dry.plan_sweep(tiny_config, overhead_s=1.0, report_s=0.5)
    assert more["overhead_s_per_report"] == 0.5
    every, max_t = tiny_config.train.eval_every, tiny_config.search.scheduler.max_t
    for b, m in zip(base["widths"], more["widths"]):
        design_evals = m["confirm_trials"] * (max_t // every)
        assert m["gpu_hours"] - b["gpu_hours"] == pytest.approx(
            0.5 * (m["evals"] + design_evals) / 3600)
    t_evals = -(-tiny_config.target_steps // every)
    # the one-process CPU target holds every CPU the sweep holds (ray.num_cpus: 2)
    assert more["target"]["devices"] == tiny_config.ray.num_cpus
    assert more["target_gpu_hours"] - base["target_gpu_hours"] == pytest.approx(
        0.5 * t_evals * more["target"]["devices"] / 3600)
    with pytest.raises(ValueError, match="report_s = -1"):
        dry.plan_sweep(tiny_config, report_s=-1.0)


def test_budget_cuts_a_sweep_short_and_loses_no_trial(ray_local, tmp_path):
    from mutune.services.api import run
    from mutune.config import parse_config

    d = make_tiny_config().model_dump(mode="json")
    d["search"]["num_samples"] = 6
    # 0.72 device-seconds: below what the first trials on the two fresh Ray workers hold
    # (each worker imports Ray Tune and torch: over a second even on a fast day), so the cut
    # does not depend on the machine's speed (3.6 device-s did: on a fast day 30 trials fit)
    d["budget"] = {"gpu_hours": 0.0002, "money": 0.02, "price_per_hour": 2.5}
    cfg = parse_config(d)
    url = f"sqlite:///{tmp_path / 'b.db'}"
    result = run(cfg, db=url, out_dir=tmp_path / "out")
    rep = result.report
    assert rep["status"] == "budget_exhausted"
    assert "budget of 0.0002 GPU-hours" in rep["reason"]
    assert rep["cost"]["budget_gpu_hours"] == pytest.approx(0.0002)
    with Store.open(url) as store:
        rows = store.sweep_rows(result.sweep_id)
    trials = rows["trials"]
    assert 0 < len(trials) < 2 * 6                              # cut short
    for t in trials:                                            # no trial lost
        assert t["status"] in ("completed", "stopped", "diverged"), t
        assert t["allocated_s"] is not None and t["reports"], t
        if (t["reason"] or "").startswith("budget exhausted"):
            rung = int(t["reason"].rsplit(" ", 1)[1])
            assert t["steps"] == rung                           # it finished its rung
    assert rows["target"] is None
    spent = rep["cost"]["spent_gpu_hours"]
    print(f"budget 0.0002 GPU-h, spent {spent:.5f} GPU-h over {len(trials)} trials:",
          [(t["width"], t["status"], t["steps"], t["reason"]) for t in trials])
    # the overshoot is bounded by the trials admitted before any speed was measured (the
    # first ray.num_cpus ones start together) finishing their first rung
    first = sorted(trials, key=lambda t: t["id"])[:cfg.ray.num_cpus]
    assert spent <= 0.0002 + sum(t["allocated_s"] * t["devices"] for t in first) / 3600
    assert json.loads((tmp_path / "out" / "latest" / "report.json").read_text())["status"] == \
        "budget_exhausted"


def test_tensorboard_tracking_writes_every_trials_events(ray_local, tmp_path):
    import importlib.util
    import itertools
    import struct

    from tensorboardX.proto import event_pb2

    from mutune.config import TrackingConfig
    from mutune.errors import SearchError
    from mutune.proxies.task import ProxyTask, load_task_data
    from mutune.pipeline.recording import MemoryRecorder
    from mutune.search.backends.ray_tune.cluster import tracking_callbacks
    from tests.search.runs import run_trials

    cfg = make_tiny_config()
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()
    points = [{"hparams": {"lr": lr, "output_mult": 1.0}, "seed": i, "index": i}
              for i, lr in enumerate((0.01, 0.03))]
    rec = MemoryRecorder()
    sweep = rec.sweep_started({}, 0, {})
    out = run_trials(points, task=task, width=16, max_t=6, recorder=rec, sweep_id=sweep,
                     proxy_sweep_id=None, kind="proxy", scheduler=None, metric="val_loss",
                     mode="min", ray_cfg=cfg.ray, storage=tmp_path, name="tb",
                     seq=itertools.count(1), tracking=TrackingConfig(tensorboard=True))
    assert [t.status for t in out.trials] == ["completed", "completed"]
    events = sorted(tmp_path.glob("tb/*/events.out.tfevents.*"))
    assert len(events) == 2 and all(e.stat().st_size > 0 for e in events)
    data = events[0].read_bytes()        # TFRecord frames: read back the logged scalars
    tags, pos = set(), 0
    while pos < len(data):
        (n,) = struct.unpack("<Q", data[pos:pos + 8])
        ev = event_pb2.Event.FromString(data[pos + 12:pos + 12 + n])
        tags |= {v.tag for v in ev.summary.value}
        pos += 12 + n + 4
    assert any(t.endswith("val_loss") for t in tags), tags
    if importlib.util.find_spec("mlflow") is None:
        with pytest.raises(SearchError, match="needs mlflow"):
            tracking_callbacks(TrackingConfig(mlflow_uri="file:///tmp/x"), "n")


def test_dry_run_extrapolates_a_large_target_from_its_flops(tiny_config, monkeypatch):
    """Above the size limit the target is never built: its step time is its FLOPs per step
    at the FLOP/s the widest proxy achieved, the formula says so; below it, it is timed."""
    import mutune.pipeline.dry_run as dry
    from mutune.config import parse_config
    from mutune.pipeline.ledger_stage import flops_per_sample
    from mutune.proxies.task import ProxyTask, load_task_data

    timing = {"setup_s": 0.5, "s_per_step": 0.01, "s_per_eval": 0.2, "warmup_s": 1.0}
    built = []
    monkeypatch.setattr(dry, "_warmup", lambda task, width, *a, **k:
                        built.append(width) or dict(timing))
    d = tiny_config.model_dump(mode="json")
    d["target"]["width"] = 32768                        # a 2-billion-parameter MLP
    cfg = parse_config(d)
    plan = dry.plan_sweep(cfg, overhead_s=1.0)
    assert cfg.target.width not in built                 # the target was not timed (built)
    tgt = plan["target"]
    assert tgt["timing"] == "extrapolated" and tgt["n_params"] > 2e9
    assert "FLOPs/step" in tgt["formula"]
    task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg))
    w = cfg.widths[-1]
    ratio = (flops_per_sample(cfg, cfg.target.width, task.n_params(cfg.target.width, {}))
             / flops_per_sample(cfg, w, task.n_params(w, {})))
    # same batch size; the one-process CPU target's 2 threads assumed to scale fully
    assert tgt["devices"] == 2
    assert tgt["s_per_step"] == pytest.approx(0.01 * ratio / 2)
    small = dry.plan_sweep(tiny_config, overhead_s=1.0)
    assert small["target"]["timing"] == "timed" and tiny_config.target.width in built


def test_dry_run_prices_a_target_on_several_workers(tiny_config, monkeypatch):
    """target.num_workers W: the target is timed on one worker's share of the batch and
    billed W × a trial's devices; its wall time is one worker's; the proxies are unchanged."""
    import mutune.pipeline.dry_run as dry
    from mutune.config import parse_config

    timing = {"setup_s": 0.5, "s_per_step": 0.01, "s_per_eval": 0.2, "warmup_s": 1.0}
    batches = {}
    monkeypatch.setattr(dry, "_warmup", lambda task, width, *a, **k:
                        batches.setdefault(width, task.train.batch_size) and dict(timing))
    plans = {}
    for w in (1, 2):
        d = tiny_config.model_dump(mode="json")
        d["target"]["num_workers"] = w
        d["target"]["cpus"] = 1         # one worker holds one trial's CPUs, as each of two
        batches.clear()
        plans[w] = dry.plan_sweep(parse_config(d), overhead_s=1.0)
        assert batches[tiny_config.target.width] == tiny_config.train.batch_size // w
        assert plans[w]["target"]["workers"] == w
        assert plans[w]["target"]["batch_per_worker"] == tiny_config.train.batch_size // w
    assert plans[2]["target_gpu_hours"] == pytest.approx(2 * plans[1]["target_gpu_hours"])
    assert plans[2]["proxy_gpu_hours"] == pytest.approx(plans[1]["proxy_gpu_hours"])
    assert plans[2]["wall_s_estimate"] == pytest.approx(plans[1]["wall_s_estimate"])


@pytest.mark.slow
def test_dry_run_times_on_the_trial_device_in_a_ray_task(tiny_config):
    """Where trials get GPUs or a cluster, the warm-up runs as one Ray task holding a
    trial's resources (forced here on CPU); the plan says where and on what, and a trial's
    resources the cluster lacks are a config error, not a task that never starts."""
    import mutune.pipeline.dry_run as dry
    from mutune.config import parse_config
    from mutune.errors import ConfigError

    local = dry.plan_sweep(tiny_config, overhead_s=1.0)
    assert local["timed_on"]["where"] == "driver" and local["timed_on"]["device"] == "cpu"
    plan = dry.plan_sweep(tiny_config, overhead_s=1.0, on_ray=True)
    assert plan["timed_on"]["where"] == "ray task"
    assert plan["timed_on"]["device"] == "cpu"
    assert all(w["s_per_step"] > 0 and w["s_per_eval"] > 0 for w in plan["widths"])
    assert plan["target"]["timing"] == "timed" and plan["target"]["s_per_step"] > 0
    assert set(plan["widths"][0]) == set(local["widths"][0])
    d = tiny_config.model_dump(mode="json")
    d["ray"]["gpus_per_trial"] = 1
    with pytest.raises(ConfigError, match="gpus_per_trial = 1.*0 GPUs"):
        dry.plan_sweep(parse_config(d), overhead_s=1.0)
