"""The main job end to end on tiny settings: real Ray, real mup models, real databases."""
from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

import mutune
from mutune.config import parse_config
from mutune.services.cli import app

pytestmark = pytest.mark.slow

REQUIRED = {
    "top": {"sweep_id", "device_kind", "proxies", "rules", "target", "cost"},
    "proxy": {"width", "best_config", "best_val_loss", "trials"},
    "rule": {"hyperparameter", "slope", "transferred_value"},
    "target": {"width", "config", "val_loss"},
    "cost": {"proxy_gpu_hours", "target_gpu_hours", "total_gpu_hours", "naive_gpu_hours",
             "naive_formula", "saved_gpu_hours", "saved_fraction", "ettr"},
}


def test_main_job_end_to_end(ray_local, tiny_config, one_store_url, tmp_path):
    store_url = one_store_url
    # three widths and 8 samples: enough trials at the first rung for the quadratic optimum,
    # enough sizes for rule intervals and the loss law
    d = tiny_config.model_dump(mode="json")
    d["widths"], d["target"]["width"] = [16, 32, 64], 128
    d["search"]["num_samples"] = 8
    d["search"]["replicates"] = 2        # two seeds per trial, averaged
    d["transfer"]["n_boot"] = 200
    # the 3 × 3 design: one seed per point, three at the centre (the defaults)
    d["transfer"]["confirm_replicates"] = 1
    d["transfer"]["confirm_center_replicates"] = 3
    d["transfer"]["gate"] = "proceed"         # a gate round may run; the target trains anyway
    from mutune.config import parse_config
    from rich.console import Console
    shown = io.StringIO()      # not a terminal: progress as plain lines, then the summary
    result = mutune.run(parse_config(d), db=store_url, out_dir=tmp_path / "out",
                        console=Console(file=shown, width=200))
    lines = shown.getvalue().splitlines()
    assert any(ln.startswith("width 16: 8/8 (") for ln in lines)
    assert any(ln.startswith("target 128: 1/1 (") for ln in lines)
    assert f"mutune sweep {result.sweep_id} (" in shown.getvalue()
    rep = json.loads(result.report_path.read_text())
    assert rep == json.loads(json.dumps(result.report))
    assert REQUIRED["top"] <= rep.keys()
    assert rep["device_kind"] == "cpu"
    assert [p["width"] for p in rep["proxies"]] == [16, 32, 64]
    gate = rep["gate"]
    assert gate["setting"] == "proceed" and len(gate["rounds"]) <= 1
    for p in rep["proxies"]:
        assert REQUIRED["proxy"] <= p.keys() and p["trials"] == 8
        # the optimum rests on the full horizon: the 3 × 3 design, 11 trials (× 2 after a
        # gate round of replicates, or two designs after a widening) at max_t = 27
        assert p["confirm_trials"] in (11, 22)
        opt = p["optimum"]
        assert opt["method"] in {"quadratic", "diagonal-quadratic", "weighted-mean"}
        assert opt["milestone"] == 27 and opt["optimum_horizon"] == "max_t"
        assert opt["n_trials"] >= 11 and opt["n_seeds"] >= 2 and opt["n_points"] >= 9
        if opt["intervals"]["lr"] is not None:
            lo, hi = opt["intervals"]["lr"]
            assert lo <= opt["values"]["lr"] <= hi
        assert math.isfinite(p["best_val_loss"]) and p["best_val_loss"] < math.log(10)
        assert p["chosen_rung"] == 27 and p["best_test_loss"] > 0
    rules = {r["hyperparameter"]: r for r in rep["rules"]}
    assert set(rules) == {"lr", "output_mult"}
    lr = rules["lr"]
    # the rule is fitted on the smoothed per-width optima, with intervals and a verdict
    assert lr["optima"] == pytest.approx([p["optimum"]["values"]["lr"] for p in rep["proxies"]])
    assert lr["slope_interval"][0] <= lr["slope"] <= lr["slope_interval"][1]
    if lr["transferred_interval"][0] is not None:
        lo, hi = lr["transferred_interval"]
        assert lo <= lr["transferred_value"] <= hi
    assert lr["verdict"] in {"stable", "drifting", "noisy", "edge", "too_few_sizes", "fallback"}
    assert lr["optimum_horizons"] == ["max_t"] * 3
    assert lr["reason"]
    assert rep["target"]["width"] == 128
    assert rep["target"]["config"]["lr"] == pytest.approx(lr["transferred_value"])
    assert rep["target"]["val_loss"] < math.log(10)
    assert rep["target"]["test_loss"] > 0 and rep["target"]["val_loss_se"] > 0
    assert rep["importance"]["width"] == 64
    # predicted before the target ran, stored, and reported beside the actual loss
    assert rep["loss_law"]["n_params"] == sorted(rep["loss_law"]["n_params"])
    if rep["target"].get("predicted_val_loss") is not None:
        p_lo, p_hi = rep["target"]["predicted_val_loss_interval"]
        assert p_lo <= rep["target"]["predicted_val_loss"] <= p_hi
    else:
        assert rep["target"]["predicted_val_loss_error"]
    folder = tmp_path / "out" / f"sweep-{result.sweep_id}"    # the sweep's own folder
    assert result.report_path == folder / "report.json"
    assert (tmp_path / "out" / "latest").resolve() == folder.resolve()
    assert (folder / "transfer.png").stat().st_size > 10_000
    c = rep["cost"]
    assert REQUIRED["cost"] <= c.keys()
    assert c["total_gpu_hours"] == pytest.approx(c["proxy_gpu_hours"] + c["target_gpu_hours"])
    assert c["saved_gpu_hours"] == pytest.approx(c["naive_gpu_hours"] - c["total_gpu_hours"])
    assert c["saved_fraction"] == pytest.approx(c["saved_gpu_hours"] / c["naive_gpu_hours"])
    assert 0 < c["ettr"] < 1
    # ETTR named per level: the trial figure (ettr kept equal to it) and the sweep's over
    # what it held from submission; the idle causes add up to held minus the work
    assert c["trial_ettr"] == c["ettr"] and 0 < c["sweep_ettr"] < 1
    assert c["held_devices"] == 2.0             # the local cluster's 2 CPUs, 1 per trial
    assert set(c["idle_gpu_hours_by_cause"]) == {
        "sweep_startup", "between_widths", "fits", "tails", "target_fewer_devices",
        "worker_start", "trial_overhead", "recovery"}
    # every Ray Tune run starts its actors anew: the first trial on each waits for one
    assert c["idle_gpu_hours_by_cause"]["worker_start"] > 0
    assert c["idle_gpu_hours_by_cause"]["sweep_startup"] > 0      # data, shapes, pre-flight
    # the one-process CPU target trains on both CPUs the sweep holds: none idles under it
    assert c["idle_gpu_hours_by_cause"]["target_fewer_devices"] == 0
    assert c["idle_breakdown_check"]["relative_gap"] < 0.01
    assert result.plot_path.stat().st_size > 10_000

    from mutune.services.store import Store
    with Store.open(store_url) as store:
        n = store.counts(result.sweep_id)
        rows = store.sweep_rows(result.sweep_id)
    assert rows["sweep"]["status"] == "completed"
    confirm = sum(p["confirm_trials"] for p in rep["proxies"])
    assert n["trials"] == 3 * 8 + confirm + 1 and n["proxy_sweeps"] == 3
    assert n["scaling_laws"] == 1                               # the loss law
    assert {c["kind"] for c in rows["checks"]} >= {"preflight", "importance", "gate"}
    assert n["trial_reports"] >= 8 and n["scheduler_events"] >= 8
    assert n["transfer_rules"] == 2 and n["target_runs"] == 1 and n["ledger_entries"] >= 25
    # the designs and a gate round joined the proxy run: every trial but the target lies in
    # its one Ray Tune experiment (no run of their own, no workers started again)
    assert len({Path(t["checkpoint_dir"]).parent.name for t in rows["trials"]
                if t["kind"] != "target"}) == 1
    # each width's best is the configuration with the lowest seed mean at max_t
    for ps, p in zip(sorted(rows["proxy_sweeps"], key=lambda r: r["width"]), rep["proxies"]):
        means = {}
        for t in rows["trials"]:
            if (t["proxy_sweep_id"] == ps["id"] and t["reports"]
                    and t["reports"][-1]["step"] == 27):
                key = tuple(sorted((k, t["config"][k]) for k in ("lr", "output_mult")))
                means.setdefault(key, []).append(t["reports"][-1]["metrics"]["val_loss"])
        assert p["best_val_loss"] == pytest.approx(min(sum(v) / len(v)
                                                       for v in means.values()))
    target_trial = next(t for t in rows["trials"] if t["kind"] == "target")
    # proxy trials average two seeds; the target trains one model, and so does every trial
    # of the naive sweep at target size (the line with the proxies' seeds is shown beside)
    assert {r["metrics"]["replicates"] for t in rows["trials"] if t["kind"] == "proxy"
            for r in t["reports"]} == {2}
    assert {r["metrics"]["replicates"] for r in target_trial["reports"]} == {1}
    naive = next(e for e in rows["ledger"] if e["name"] == "naive_gpu_hours")
    assert naive["inputs"]["replicates_per_trial"] == 2
    assert naive["inputs"]["seeds_per_trial"] == 1
    assert c["naive_replicates_gpu_hours"] > c["naive_gpu_hours"]
    assert [r["step"] for r in target_trial["reports"]] == list(range(3, 28, 3))
    law = next(x for x in rows["laws"] if x["kind"] == "loss_vs_params")
    assert law["data"]["target_width"] == 128
    assert all(t["status"] in {"completed", "stopped", "diverged"} for t in rows["trials"])
    assert rows["provenance"]["dataset"]["fingerprint"]
    bsh = (result.report_path.parent / "base_shapes.bsh").read_text()
    assert bsh.startswith("# mup base shapes") and rows["provenance"]["base_shapes"] == bsh
    # every proxy trial has its GPU-hours in the ledger, and they add up to the proxy line
    per_trial = [e["value"] for e in rows["ledger"]
                 if e["scope"] == "trial" and e["name"] == "gpu_hours"]
    assert len(per_trial) == n["trials"]
    assert sum(per_trial) == pytest.approx(c["total_gpu_hours"])
    # each trial's time categories add up to its allocated seconds
    by_trial = {}
    for e in rows["ledger"]:
        if e["scope"] == "trial" and e["name"].endswith("_s"):
            by_trial.setdefault(e["trial_id"], {})[e["name"]] = e["value"]
    assert len(by_trial) == n["trials"]
    for t in rows["trials"]:
        cats = by_trial[t["id"]]
        assert set(cats) == {"productive_s", "eval_s", "checkpoint_s", "setup_s",
                             "recovery_s", "other_s"}
        assert sum(cats.values()) == pytest.approx(max(t["allocated_s"], sum(cats.values())))
        assert cats["productive_s"] == pytest.approx(t["productive_s"])
    # the sweep's hold on the devices: useful + waste categories = held
    assert set(c["waste_gpu_hours"]) == {"early_stopped", "failed", "diverged", "recovery",
                                         "idle"}
    assert c["useful_gpu_hours"] + sum(c["waste_gpu_hours"].values()) == \
        pytest.approx(c["held_gpu_hours"])
    assert c["held_gpu_hours"] >= c["total_gpu_hours"] * 0.999
    stopped_h = sum(t["allocated_s"] * t["devices"] / 3600 for t in rows["trials"]
                    if t["status"] == "stopped")
    assert c["waste_gpu_hours"]["early_stopped"] == pytest.approx(stopped_h, rel=1e-6)
    assert 0 < c["mfu"] < 1 and c["mfu_inputs"]["peak_source"].startswith("measured")
    assert c["price_per_hour"] == 0.04 and c["currency"] == "USD"
    assert c["saved_money"] == pytest.approx(c["saved_gpu_hours"] * 0.04)
    assert c["gpu_hours_per_trial"] == pytest.approx(c["proxy_gpu_hours"] / (24 + confirm))

    # `mutune report --full` renders the same figures from the database alone
    out = CliRunner().invoke(app, ["report", str(result.sweep_id), "--db", store_url,
                                   "--full", "--json-out", str(tmp_path / "again.json")],
                             env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert json.loads((tmp_path / "again.json").read_text()) == rep
    assert f"{c['proxy_gpu_hours']:.6f}" in out.output
    assert f"{c['target_gpu_hours']:.6f}" in out.output
    assert c["target_devices"] == 2 and c["target_samples_per_s"] > 0     # both CPUs held
    assert f"{rep['target']['val_loss']:.4g}" in out.output


def test_cli_rejects_a_bad_config_with_field_value_rule(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodel: {family: mlp}\ndata: {kind: digits}\nwidths: [64]\n"
                   "search: {space: {lr: {type: loguniform, low: 1, high: 0.1}}}\n"
                   "target: {width: 128}\n")
    out = CliRunner().invoke(app, ["run", str(bad), "--db", f"sqlite:///{tmp_path}/x.db"],
                             env={"COLUMNS": "200"})
    assert out.exit_code == 2
    assert "widths = [64]: List should have at least 2 items" in out.output
    assert "search.space.lr = {…}: high (0.1) must be > low (1.0)" in out.output


def test_rerun_at_concurrency_one_reproduces_reports(ray_local, tiny_config, tmp_path):
    from mutune.services.api import rerun
    from mutune.services.store import Store

    # no confirmation designs (fixed points, trained like any trial): the searcher's and the
    # scheduler's decisions are what concurrency 1 must reproduce. The schedule is searched
    # as a categorical knob (names through Ray, the database, the rerun and the rules)
    d = tiny_config.model_dump(mode="json")
    d["ray"]["max_concurrent_trials"] = 1
    d["transfer"]["confirm_replicates"] = 0
    d["search"]["space"]["lr_schedule"] = {"type": "choice", "values": ["constant", "cosine"]}
    cfg = parse_config(d)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    first = mutune.run(cfg, db=url, out_dir=tmp_path / "a", progress=False)
    second, warnings = rerun(first.sweep_id, db=url, out_dir=tmp_path / "b", progress=False)
    assert warnings == []
    assert second.sweep_id != first.sweep_id

    def curves(sweep_id):
        with Store.open(url) as store:
            rows = store.sweep_rows(sweep_id)
        return sorted((t["kind"], t["width"], t["seed"],
                       tuple((r["step"], r["metrics"]["val_loss"]) for r in t["reports"]))
                      for t in rows["trials"])

    assert curves(first.sweep_id) == curves(second.sweep_id)
    assert second.report["rules"] == first.report["rules"]
    rule = {r["hyperparameter"]: r for r in first.report["rules"]}["lr_schedule"]
    assert rule["verdict"] == "per_choice" and rule["transferred_value"] in ("constant", "cosine")
    assert all(isinstance(v, str) for v in rule["optima"])
    assert first.report["target"]["config"]["lr_schedule"] == rule["transferred_value"]


def test_provenance_differences_are_named():
    from mutune.pipeline.provenance import provenance_differences

    rec = {"packages": {"torch": "2.13.0", "mup": "1.0.0"}, "python": "3.11.7",
           "cpu_model": "X", "cpu_count": 2, "dataset": {"fingerprint": "ab", "size_bytes": 9}}
    now = {"packages": {"torch": "2.14.1", "mup": "1.0.0"}, "python": "3.11.7",
           "cpu_model": "Y", "cpu_count": 2, "dataset": {"fingerprint": "cd", "size_bytes": 9}}
    diffs = provenance_differences(rec, now)
    assert diffs == ["package torch: recorded 2.13.0, now 2.14.1",
                     "CPU model: recorded X, now Y",
                     "dataset fingerprint: recorded ab, now cd"]
    assert provenance_differences(rec, rec) == []
