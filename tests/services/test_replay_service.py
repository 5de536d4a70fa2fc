"""`replay_sweep` on recorded sweeps: synthetic ones (both backends) and one real Ray sweep."""
from __future__ import annotations

import heapq
import itertools
import json
import math

import numpy as np
import pytest
from rich.console import Console

from mutune.errors import SearchError, StoreError
from mutune.search.schedulers.asha import ASHA, Decision
from mutune.search.best import best_at_rung
from mutune.services.stored_replay import (ReplayChanges, render_replay, replay_sweep,
                                           sweep_curves)

# one test process for this module: its module-scoped fixture is built once (pyproject's
# --dist loadgroup)
pytestmark = pytest.mark.xdist_group("services.test_replay_service")

# ---------------------------------------------------------------- synthetic recorded sweeps
# Written through the Store's recorder methods as the live book does (report seq, then one
# seq per decision), with the reports of concurrent trials interleaved.
SPACE = {"lr": {"type": "loguniform", "low": 1e-4, "high": 1.0},
         "output_mult": {"type": "uniform", "low": 0.5, "high": 4.0},
         "init_std": {"type": "choice", "values": [0.5, 1.0, 2.0]}}


def record_sweep(store, *, widths=(16, 32), n=12, r=1, eta=3, max_t=9, every=1, workers=2,
                 seed=0, mode="min", nan_trial=None, fail_trial=None):
    """A whole sweep run on synthetic curves with the real ASHA core at ``workers`` concurrent
    trials (their reports interleave); returns (sweep_id, {width: [trial ids]})."""
    config = {"name": "synthetic", "seed": seed,
              "search": {"space": SPACE, "fixed": {"weight_decay": 0.0}, "metric": "val_loss",
                         "mode": mode, "num_samples": n,
                         "scheduler": {"kind": "asha", "grace_period": r,
                                       "reduction_factor": eta, "max_t": max_t}},
              "ray": {"num_cpus": workers, "cpus_per_trial": 1}}
    sweep_id = store.sweep_started(config, seed, {"test": True})
    seq = itertools.count(1)
    ids = {}
    rng = np.random.default_rng(seed)
    for width in widths:
        settings = {"scheduler": config["search"]["scheduler"], "num_samples": n,
                    "metric": "val_loss", "mode": mode}
        ps = store.proxy_sweep_started(sweep_id, width, settings)
        core = ASHA(grace_period=r, reduction_factor=eta, max_t=max_t, mode=mode)
        hps = [{"lr": float(np.exp(rng.uniform(np.log(1e-4), 0.0))),
                "output_mult": float(rng.uniform(0.5, 4.0)),
                "init_std": float(rng.choice([0.5, 1.0, 2.0])), "weight_decay": 0.0}
               for _ in range(n)]
        steps = list(range(every, max_t + 1, every))
        curves = []
        for i in range(n):
            a, b = rng.uniform(0.1, 1.0), rng.uniform(0.5, 2.0)
            if i in (nan_trial, fail_trial):  # good trials, so they live to diverge / fail
                a, b = 0.01 * (1 + i), 0.01
            vals = [a + b / math.sqrt(s) for s in steps]
            if mode == "max":
                vals = [-v for v in vals]
            if i == nan_trial:
                vals[len(vals) // 2:] = [math.nan] * (len(vals) - len(vals) // 2)
            sps = float(rng.uniform(0.05, 0.2))
            curves.append([(s, v, s * sps) for s, v in zip(steps, vals)])
        tids: list[int] = []
        heap: list = []
        nxt = 0

        def start(t):
            nonlocal nxt
            if nxt < n:
                i = nxt
                nxt += 1
                tid = store.trial_started(sweep_id, ps, "proxy", f"w{width}_t{i:03d}", width,
                                          hps[i], 100 + i)
                tids.append(tid)
                heapq.heappush(heap, (t + curves[i][0][2], i, 0, t, tid))

        for _ in range(workers):
            start(0.0)
        while heap:
            t, i, j, t0, tid = heapq.heappop(heap)
            key = f"w{width}_t{i:03d}"
            step, val, sec = curves[i][j]
            store.trial_reported(tid, step, {"val_loss": val, "productive_s": sec * 0.8,
                                             "eval_s": sec * 0.2, "setup_s": 0.1}, next(seq))
            if i == fail_trial and j == 1:
                status = "failed"
            else:
                js = core.on_report(key, step, val)
                for jd in js:
                    store.scheduler_decided(tid, jd.milestone, jd.value, jd.cutoff,
                                            jd.decision.value, next(seq))
                bad = [jd for jd in js if jd.decision in (Decision.STOP, Decision.DIVERGED)]
                if bad:
                    status = "diverged" if bad[0].decision is Decision.DIVERGED else "stopped"
                elif step >= max_t:
                    status = "completed"
                else:
                    heapq.heappush(heap, (t0 + curves[i][j + 1][2], i, j + 1, t0, tid))
                    continue
            store.trial_finished(tid, status, None if status == "completed" else status,
                                 {"allocated_s": sec + 0.5, "productive_s": sec * 0.8,
                                  "eval_s": sec * 0.2, "overhead_s": 0.5, "steps": step,
                                  "devices": 1, "device_kind": "cpu"})
            start(t)
        best = best_at_rung(core.rung_values(), mode=mode, min_trials=3)
        bi = int(best.trial.rsplit("t", 1)[1])
        store.proxy_sweep_finished(ps, {"trial_id": tids[bi], "milestone": best.milestone,
                                        "config": hps[bi], "val_loss": best.value,
                                        "trials": n, "rung_trials": best.n_trials})
        ids[width] = tids
    store.sweep_finished(sweep_id, "completed")
    return sweep_id, ids


def test_original_settings_reproduce_decisions_and_best(store):
    sweep_id, ids = record_sweep(store, n=14, workers=3, nan_trial=5, fail_trial=9)
    res = replay_sweep(store, sweep_id)
    assert json.loads(json.dumps(res)) == res
    assert [w["width"] for w in res["widths"]] == [16, 32]
    rows = store.sweep_rows(sweep_id)
    for w in res["widths"]:
        r, o = w["replayed"], w["original"]
        assert r["method"] == "recorded-order"
        assert w["matches_original"] is True
        assert r["decisions"] == o["decisions"] > 0
        assert r["best"]["trial_id"] == o["best"]["trial_id"]
        assert r["best"]["value"] == o["best"]["value"]
        assert r["best"]["config"] == o["best"]["config"]
        assert r["missing_data"]["decisions"] == 0
        assert r["statuses"].get("failed") == 1 and r["statuses"].get("diverged") == 1
        trials = [t for t in rows["trials"] if t["id"] in ids[w["width"]]]
        assert o["gpu_hours"] == pytest.approx(sum(t["allocated_s"] for t in trials) / 3600)
        # the replay bills recorded productive + eval seconds, as the original trials did
        assert r["gpu_hours"] == pytest.approx(o["productive_gpu_hours"])


def test_other_settings_use_the_simulated_clock_and_count_missing_data(store):
    sweep_id, _ = record_sweep(store, widths=(16,), n=20, r=1, eta=3, max_t=9)
    gentle = replay_sweep(store, sweep_id, changes=ReplayChanges(reduction_factor=2))["widths"][0]
    assert gentle["replayed"]["method"] == "simulated-clock"
    assert gentle["matches_original"] is None
    md = gentle["replayed"]["missing_data"]
    assert md["decisions"] > 0 and md["decisions"] == len(md["trials"])
    assert md["treatment"].startswith("censored")
    harsh = replay_sweep(store, sweep_id, changes=ReplayChanges(
        grace_period=1, reduction_factor=3, max_t=9, concurrency=1,
        scheduler="asha"))["widths"][0]
    assert harsh["replayed"]["method"] == "simulated-clock"       # concurrency differs
    assert harsh["replayed"]["wall_s"] == pytest.approx(harsh["replayed"]["device_s"])
    hb = replay_sweep(store, sweep_id, width=16,
                      changes=ReplayChanges(scheduler="hyperband"))["widths"][0]
    assert hb["replayed"]["settings"]["kind"] == "hyperband"
    assert hb["replayed"]["best"] is not None
    assert sum(hb["replayed"]["statuses"].values()) == 20
    out = Console(record=True, width=200)
    render_replay({"sweep_id": sweep_id, "widths": [gentle, hb]}, out)
    text = out.export_text()
    assert "original" in text and "simulated-clock" in text and "censored" in text


def test_errors_name_the_problem(store):
    sweep_id, _ = record_sweep(store, widths=(16, 32), n=4)
    with pytest.raises(StoreError, match=r"no proxy sweep at width 64 \(widths: \[16, 32\]\)"):
        replay_sweep(store, sweep_id, width=64)
    with pytest.raises(SearchError, match="scheduler = 'pbt'"):
        replay_sweep(store, sweep_id, changes=ReplayChanges(scheduler="pbt"))
    with pytest.raises(SearchError, match="concurrency = 0"):
        replay_sweep(store, sweep_id, changes=ReplayChanges(concurrency=0))
    with pytest.raises(StoreError, match="no sweep with id 999"):
        replay_sweep(store, 999)


def test_curves_take_seconds_from_productive_and_eval():
    trials = [{"key": "a", "productive_s": 2.0, "eval_s": 1.0, "allocated_s": 5.0, "reports": [
        {"step": 1, "seq": 1, "metrics": {"val_loss": 1.0, "productive_s": 0.5, "eval_s": 0.1}},
        {"step": 2, "seq": 3, "metrics": {"val_loss": "nan", "productive_s": 1.0,
                                          "eval_s": 0.2}}]},
              {"key": "b", "productive_s": 2.0, "eval_s": 2.0, "reports": [
                  {"step": 2, "seq": 2, "metrics": {"val_loss": 1.0}},
                  {"step": 4, "seq": 4, "metrics": {"val_loss": 0.5}}]}]
    c = sweep_curves(trials, "val_loss")
    assert c["a"][0] == (1, 1.0, pytest.approx(0.6)) and c["a"][1][0] == 2
    assert c["a"][1][1] != c["a"][1][1]  # NaN kept
    assert c["b"] == [(2, 1.0, 2.0), (4, 0.5, 4.0)]


# ---------------------------------------------------------------- one real sweep (Ray)
@pytest.fixture(scope="module")
def real_sweep(ray_local, tmp_path_factory):
    import mutune
    from tests.conftest import make_tiny_config

    tmp = tmp_path_factory.mktemp("real")
    url = f"sqlite:///{tmp / 'mutune.db'}"
    result = mutune.run(make_tiny_config(), db=url, out_dir=tmp / "out", progress=False)
    return url, result.sweep_id


@pytest.mark.slow
def test_real_sweep_replays_exactly_with_original_settings(real_sweep):
    from mutune.services.store import Store

    url, sweep_id = real_sweep
    with Store.open(url) as store:
        res = replay_sweep(store, sweep_id)
        other = replay_sweep(store, sweep_id,
                             changes=ReplayChanges(scheduler="hyperband", concurrency=1))
    for w in res["widths"]:
        assert w["replayed"]["method"] == "recorded-order"
        assert w["matches_original"] is True, w
        assert w["replayed"]["best"]["trial_id"] == w["original"]["best"]["trial_id"]
        assert 0 < w["replayed"]["gpu_hours"] <= w["original"]["gpu_hours"]
    for w in other["widths"]:
        assert w["replayed"]["method"] == "simulated-clock"
        assert sum(w["replayed"]["statuses"].values()) == 4
