"""Resume after the sweep driver dies (slow: real Ray, SQLite store, tiny MLP, concurrency 1).

The driver is "killed" by a recorder that raises right after one write reached the database —
mid-trial (after a report was stored, before the scheduler judged it) or between trials (right
after the first trial's end was stored). Then the stale trial is reaped by heartbeat and the
width is resumed; it must end exactly as an uninterrupted sweep with the same seed: the same
number of trials, no duplicated report rows, the same decisions for the same report order."""
from __future__ import annotations

import dataclasses
import json
import time

import pytest

from mutune.services.recovery import reap_stale
from mutune.errors import MutuneError
from mutune.pipeline import open_sweep
from mutune.pipeline.proxy_stage import sweep_width
from mutune.scaling.ledger import FlopsModel, compute_cost
from mutune.pipeline.resume import resume_width
from mutune.search.schedulers.factory import scheduler_from_state
from mutune.services.store import Store

pytestmark = pytest.mark.slow


class DriverKilled(Exception):
    pass


@dataclasses.dataclass
class DyingRecorder:
    """Delegates to the store; right after the write ``when`` matches the driver is dead:
    that call and every later one raise DriverKilled and write nothing (Ray logs and swallows
    some callback errors, so one raise alone would not stop the run)."""
    store: Store
    when: object
    dead: bool = False

    def __getattr__(self, name):
        attr = getattr(self.store, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            if self.dead:
                raise DriverKilled(name)
            out = attr(*args, **kwargs)
            if self.when(name, args, kwargs):
                self.dead = True
                raise DriverKilled(name)
            return out
        return call


def _config(tiny_config, variant="stopping"):
    d = tiny_config.model_dump(mode="json")
    d["search"]["scheduler"]["variant"] = variant
    # a lease of 3 s: "right away" after a driver dies must hold on a loaded machine too (Ray
    # tears its run down in between; a 0.8 s lease expired there under load)
    d["ray"].update(max_concurrent_trials=1, heartbeat_s=0.2, lease_s=3.0)
    d["train"]["checkpoint_every"] = 6        # checkpoints at steps 6, 12, …
    return type(tiny_config).model_validate(d)


def _summary(store, sweep_id):
    """Per trial (by seed), its report steps and values; the decisions in sequence order."""
    rows = store.sweep_rows(sweep_id)
    by_id = {t["id"]: t for t in rows["trials"]}
    trials = {t["seed"]: [(r["step"], r["metrics"]["val_loss"]) for r in t["reports"]]
              for t in rows["trials"]}
    decisions = [(by_id[e["trial_id"]]["seed"], e["milestone"], e["decision"], e["value"],
                  e["cutoff"]) for e in rows["events"]]
    statuses = {t["seed"]: t["status"] for t in rows["trials"]}
    n_reports = sum(len(t["reports"]) for t in rows["trials"])
    seqs = [r["seq"] for t in rows["trials"] for r in t["reports"]] + \
           [e["seq"] for e in rows["events"]]
    return trials, decisions, statuses, n_reports, seqs, rows


def _resumed_target(before, rows, done):
    """After a resume: no trial row added, the ended trials' reports untouched and never
    restarted; returns the target's trial row, completed after exactly one restart."""
    assert len(rows["trials"]) == len(before["trials"])            # no trial row added
    for t in rows["trials"]:
        if t["id"] in done:                                        # proxies untouched
            assert t["reports"] == done[t["id"]]["reports"] and not t["restarts"]
    (target,) = [t for t in rows["trials"] if t["kind"] == "target"]
    assert target["status"] == "completed" and target["restarts"] == 1
    return target


def _mid_trial(name, args, kwargs):
    # the first trial's report at step 9 is stored (its last checkpoint is at step 6), then
    # the driver dies before the scheduler judges it at rung 9
    return name == "trial_reported" and args[0] == 1 and args[1] == 9


def _between_trials(name, args, kwargs):
    # the first trial's end is stored, then the driver dies (1 of N trials completed)
    return name == "trial_finished" and args[0] == 1


def _fourth_trial_paused(name, args, kwargs):
    # promotion: the 4th trial's report at rung 3 is stored, then the driver dies; on resume
    # it and the trials waiting at a rung are paused without a Ray trial ("dormant")
    return name == "trial_reported" and args[0] == 4 and args[1] == 3


@pytest.mark.parametrize("when, variant", [(_mid_trial, "stopping"),
                                           (_between_trials, "stopping"),
                                           (_fourth_trial_paused, "promotion")],
                         ids=["mid-trial", "between-trials", "promotion-paused"])
def test_resumed_sweep_equals_the_uninterrupted_one(ray_local, tiny_config, tmp_path, when,
                                                    variant):
    cfg = _config(tiny_config, variant)
    with Store.open(f"sqlite:///{tmp_path / 'a.db'}") as a:
        with open_sweep(cfg, a, out_dir=tmp_path / "a") as run:
            sweep_width(run, 16, 0)
        want = _summary(a, run.sweep_id)

    with Store.open(f"sqlite:///{tmp_path / 'b.db'}") as b:
        with pytest.raises(Exception) as info:  # noqa: B017 - Ray wraps DriverKilled
            with open_sweep(cfg, DyingRecorder(b, when), out_dir=tmp_path / "b") as run:
                sweep_width(run, 16, 0)
        assert "DriverKilled" in repr(info.value) or "DriverKilled" in str(info.value)
        sweep_id = run.sweep_id
        before = b.sweep_rows(sweep_id)
        assert before["sweep"]["status"] == "running"       # a dead driver records nothing
        running = [t for t in before["trials"] if t["status"] == "running"]
        # a live trial is never reaped: right away the lease has not passed
        if running:
            with pytest.raises(MutuneError, match="within their lease"):
                reap_stale(b, sweep_id, lease_s=cfg.ray.lease_s)
        time.sleep(cfg.ray.lease_s + 0.2)
        reaped = reap_stale(b, sweep_id, lease_s=cfg.ray.lease_s)
        assert len(reaped) == len(running)
        rows = b.sweep_rows(sweep_id)
        assert all(t["status"] != "running" for t in rows["trials"])
        assert all("stale: heartbeat" in t["reason"] for t in rows["trials"]
                   if t["id"] in {r["id"] for r in running})
        last_seq = max([e["seq"] for e in rows["events"]]
                       + [r["seq"] for t in rows["trials"] for r in t["reports"]])
        if variant == "promotion":   # trials wait at a rung with no Ray trial behind them
            (ps,) = rows["proxy_sweeps"]
            assert scheduler_from_state(ps["scheduler_state"]).paused()
        with open_sweep(cfg, b, out_dir=tmp_path / "b",
                        resume=(sweep_id, last_seq)) as run:
            (ps,) = rows["proxy_sweeps"]
            _, outcome = resume_width(run, 16, 0, ps, rows)
        got = _summary(b, sweep_id)

    trials, decisions, statuses, n_reports, seqs, rows_b = got
    assert len(trials) == cfg.search.num_samples == len(want[0])   # 4 trials, not 5
    assert trials == want[0]                   # same reports, bit-identical values
    assert n_reports == want[3]                # no duplicated report rows
    assert decisions == want[1]                # same decisions, same order
    assert statuses == want[2]
    assert len(seqs) == len(set(seqs))
    assert rows_b["sweep"]["status"] == "completed"
    # the resumed scheduler holds the same rungs as the uninterrupted one
    seed_of = {t["key"]: t["seed"] for t in rows_b["trials"]}
    seed_of_a = {t["key"]: t["seed"] for t in want[5]["trials"]}
    got_rungs = {m: {seed_of[k]: v for k, v in vals.items()}
                 for m, vals in outcome.core.rung_values().items()}
    saved = scheduler_from_state(want[5]["proxy_sweeps"][0]["scheduler_state"])
    want_rungs = {m: {seed_of_a[k]: v for k, v in vals.items()}
                  for m, vals in saved.rung_values().items()}
    assert got_rungs == want_rungs
    if when is _mid_trial:
        (t,) = [t for t in rows_b["trials"] if t["restarts"]]
        assert t["status"] == "completed" and t["reason"] is None
        # resumed from its step-6 checkpoint: steps 7–9 trained twice, booked as waste
        assert t["restarts"] == 1 and t["repeated_steps"] == 3 and t["recovery_s"] > 0
        # the ledger books the recovery as waste
        stand_in = next(r for r in outcome.trials            # any other trial as "target"
                        if r.trial_id != t["id"] and r.status == "completed")
        cost, entries = compute_cost(cfg, {16: outcome}, stand_in,
                                     flops=FlopsModel(lambda w, n: 6.0 * n, None, "none"))
        assert cost["waste_gpu_hours"]["recovery"] > 0 and cost["repeated_steps"] == 3
        assert [e["inputs"]["repeated_steps"] for e in entries
                if e["name"] == "recovery_s" and e.get("inputs")] == [3]
    if variant == "promotion":
        kinds = [d[2] for d in decisions]
        assert "pause" in kinds and "promote" in kinds


@dataclasses.dataclass
class DiesAtStart(DyingRecorder):
    """Dies at the first row of trial ``key``: that call writes nothing."""
    key: str = ""

    def __getattr__(self, name):
        if name == "trial_started":
            def call(*args, **kwargs):
                if self.dead or args[3] == self.key:
                    self.dead = True
                    raise DriverKilled(name)
                return self.store.trial_started(*args, **kwargs)
            return call
        return super().__getattr__(name)


def test_a_trial_proposed_but_never_recorded_starts_on_resume(ray_local, tiny_config,
                                                              tmp_path):
    """The searcher's state may be saved after it proposed a trial and before that trial's
    first row (another trial's decision is saved while Ray starts the new one); a driver
    dying then leaves a proposal with no row. The resumed width starts that trial under its
    key with its proposed point, and ends as the uninterrupted sweep: 4 trials, not 3."""
    from mutune.search.searchers import make_searcher

    cfg = _config(tiny_config)
    with Store.open(f"sqlite:///{tmp_path / 'a.db'}") as a:
        with open_sweep(cfg, a, out_dir=tmp_path / "a") as run:
            sweep_width(run, 16, 0)
        want = _summary(a, run.sweep_id)

    with Store.open(f"sqlite:///{tmp_path / 'b.db'}") as b:
        with pytest.raises(Exception):  # noqa: B017 - Ray wraps DriverKilled
            with open_sweep(cfg, DiesAtStart(b, lambda *call: False, key="w16-t2"),
                            out_dir=tmp_path / "b") as run:
                sweep_width(run, 16, 0)
        sweep_id = run.sweep_id
        (ps,) = b.sweep_rows(sweep_id)["proxy_sweeps"]
        # the state saved in that window: the last saved one, with w16-t2 proposed
        searcher = make_searcher(cfg.search, cfg.seed, 0)
        searcher.load_state(ps["searcher_state"])
        assert "w16-t2" not in searcher.proposed
        searcher.suggest("w16-t2")
        b.scheduler_saved(ps["id"], ps["scheduler_state"], searcher.state_dict(),
                          int(ps["state_seq"]))
        rows = b.sweep_rows(sweep_id)
        assert {t["key"] for t in rows["trials"]} == {"w16-t0", "w16-t1"}
        time.sleep(cfg.ray.lease_s + 0.2)
        reap_stale(b, sweep_id, lease_s=cfg.ray.lease_s)
        rows = b.sweep_rows(sweep_id)
        last_seq = max([e["seq"] for e in rows["events"]]
                       + [r["seq"] for t in rows["trials"] for r in t["reports"]])
        with open_sweep(cfg, b, out_dir=tmp_path / "b", resume=(sweep_id, last_seq)) as run:
            resume_width(run, 16, 0, rows["proxy_sweeps"][0], rows)
        trials, decisions, statuses, n_reports, seqs, rows_b = _summary(b, sweep_id)

    assert sorted(t["key"] for t in rows_b["trials"]) == [f"w16-t{i}" for i in range(4)]
    assert trials == want[0] and decisions == want[1] and statuses == want[2]
    assert n_reports == want[3] and len(seqs) == len(set(seqs))


def test_mutune_resume_finishes_an_interrupted_main_job(ray_local, tiny_config, tmp_path):
    """The whole job: the driver dies in width 32's sweep; ``mutune resume`` (the API behind
    the command) reaps the stale trial, finishes width 32, fits, trains the target, reports."""
    from typer.testing import CliRunner

    from mutune.services.api import resume
    from mutune.services.cli import app
    from mutune.pipeline import run_pipeline

    cfg = _config(tiny_config)
    url = f"sqlite:///{tmp_path / 'c.db'}"
    with Store.open(url) as c:
        dying = DyingRecorder(c, lambda name, args, kw: name == "trial_reported"
                              and args[0] == 5 and args[1] == 9)   # width 32's 1st trial
        with pytest.raises(Exception):  # noqa: B017 - Ray wraps DriverKilled
            run_pipeline(cfg, dying, out_dir=tmp_path / "c")
        assert [t["status"] for t in c.sweep_rows(1)["trials"]].count("running") >= 1
    time.sleep(cfg.ray.lease_s + 0.2)
    result = resume(1, db=url, out_dir=tmp_path / "c")
    report = result.report
    assert report["status"] == "completed"
    assert [p["trials"] for p in report["proxies"]] == [4, 4]
    assert report["target"]["val_loss"] is not None
    assert (tmp_path / "c" / "rungs.png").is_file() and (tmp_path / "c" / "report.json").is_file()
    with Store.open(url) as c:
        rows = c.sweep_rows(1)
    # per width 4 sweep trials and the 9-point confirmation design (one seed per point, run
    # once, after the sweeps), and the target: no extra
    assert len(rows["trials"]) == (4 + 9) * 2 + 1
    assert sum(t["kind"] == "proxy" for t in rows["trials"]) == 8
    stale = [t for t in rows["trials"] if t["restarts"]]
    assert len(stale) == 1 and stale[0]["status"] == "completed"
    assert stale[0]["repeated_steps"] == 3           # from its step-6 checkpoint
    out = CliRunner().invoke(app, ["resume", "1", "--db", url, "--out", str(tmp_path / "d")])
    assert out.exit_code == 2 and "already completed" in out.output


def test_resume_during_the_confirmation_design_keeps_what_it_had_trained(ray_local, tiny_config,
                                                                         tmp_path):
    """Both widths' designs run in one Ray Tune run, the widest's first (concurrency 1). The
    driver dies as width 16's 4th design trial starts (its first three completed, and every
    trial of width 32's design): the resume keeps those rows as they are, continues the 4th
    under its own row and trains only the 5 missing points — no design trial twice."""
    from mutune.pipeline import run_pipeline
    from mutune.services.api import resume

    cfg = _config(tiny_config)
    url = f"sqlite:///{tmp_path / 'e.db'}"
    with Store.open(url) as e:
        dying = DyingRecorder(e, lambda name, args, kw: name == "trial_started"
                              and args[2] == "confirm" and args[3] == "c0w16-t3")
        with pytest.raises(Exception):  # noqa: B017 - Ray wraps DriverKilled
            run_pipeline(cfg, dying, out_dir=tmp_path / "e")
        before = {t["key"]: t for t in e.sweep_rows(1)["trials"] if t["kind"] == "confirm"}
    assert len(before) == 9 + 4 and before["c0w16-t3"]["status"] == "running"
    assert all(t["status"] == "completed" for k, t in before.items() if k != "c0w16-t3")
    time.sleep(cfg.ray.lease_s + 0.2)
    result = resume(1, db=url, out_dir=tmp_path / "e")
    assert result.report["status"] == "completed"
    with Store.open(url) as e:
        rows = e.sweep_rows(1)
    confirm = [t for t in rows["trials"] if t["kind"] == "confirm"]
    keys = [t["key"] for t in confirm]
    assert len(keys) == len(set(keys)) == 2 * 9               # one row per design trial
    assert len(rows["trials"]) == (4 + 9) * 2 + 1
    after = {t["key"]: t for t in confirm}
    for k, t in before.items():                  # the same rows; the ended ones untouched
        assert after[k]["id"] == t["id"]
        if k != "c0w16-t3":
            assert after[k]["reports"] == t["reports"] and not after[k]["restarts"]
    assert after["c0w16-t3"]["status"] == "completed" and after["c0w16-t3"]["restarts"] == 1
    assert all(t["status"] == "completed" for t in confirm)
    # each optimum rests on its 9 design trials and the sweep's trials that reached max_t
    max_t = cfg.search.scheduler.max_t
    at_max_t = {w: sum(t["kind"] == "proxy" and t["width"] == w and t["reports"]
                       and t["reports"][-1]["step"] == max_t for t in rows["trials"])
                for w in cfg.widths}
    assert [p["optimum"]["n_trials"] for p in result.report["proxies"]] == [
        9 + at_max_t[w] for w in cfg.widths]


@pytest.mark.parametrize("workers", [1])
def test_resume_during_the_target_run_continues_it_from_its_checkpoint(ray_local, tiny_config,
                                                                      tmp_path, workers):
    """The driver dies after the target's report at step 9 (its checkpoint is at step 6):
    the resume redoes no proxy or design trial and continues the target under its own trial
    and target rows from its last checkpoint. As one Ray Tune trial: from step 6 — steps 7–9
    trained twice, nothing else. (On 2 Ray Train workers, which a failing driver stops at
    their next evaluation, from step 6 or 12: the same code path, run for real below, where
    ``mutune run`` is SIGKILLed.)"""
    from mutune.pipeline import run_pipeline
    from mutune.services.api import resume

    d = _config(tiny_config).model_dump(mode="json")
    d["target"]["checkpoint_every"] = 6              # the target's checkpoints: 6, 12, …
    d["target"]["num_workers"] = workers
    cfg = type(tiny_config).model_validate(d)
    url = f"sqlite:///{tmp_path / 'g.db'}"
    with Store.open(url) as g:
        ids = {}

        def dies(name, args, kw):
            if name == "target_started":
                ids["target_trial"] = args[1]
            return name == "trial_reported" and args[0] == ids.get("target_trial") \
                and args[1] == 9

        with pytest.raises(Exception):  # noqa: B017 - Ray wraps DriverKilled
            run_pipeline(cfg, DyingRecorder(g, dies), out_dir=tmp_path / "g")
        before = g.sweep_rows(1)
    assert before["target"]["status"] == "running"
    done = {t["id"]: t for t in before["trials"] if t["kind"] != "target"}
    assert all(t["status"] != "running" for t in done.values())     # all had ended
    time.sleep(cfg.ray.lease_s + 0.2)
    result = resume(1, db=url, out_dir=tmp_path / "g")
    assert result.report["status"] == "completed"
    with Store.open(url) as g:
        rows = g.sweep_rows(1)
    target = _resumed_target(before, rows, done)
    if workers == 1:
        assert target["repeated_steps"] == 3                       # steps 7–9, from step 6
    else:
        assert target["repeated_steps"] in (0, 3)                  # from step 12, or 6
    steps = [r["step"] for r in target["reports"]]
    assert steps == sorted(set(steps)) and steps[-1] == cfg.target_steps
    assert rows["target"]["id"] == before["target"]["id"]          # the same target row
    assert rows["target"]["status"] == "completed"
    assert result.report["target"]["val_loss"] == target["reports"][-1]["metrics"]["val_loss"]
    cost = result.report["cost"]             # billed per worker, throughput over all of them
    assert cost["target_devices"] == workers * cfg.ray.cpus_per_trial
    assert cost["target_samples_per_s"] == pytest.approx(
        cost["target_samples_per_device_s"] * workers)


def test_sigkill_of_mutune_run_during_its_target_then_mutune_resume(ray_local, tiny_config,
                                                                   tmp_path):
    """The real thing: ``mutune run`` in its own process (joined to this session's cluster
    through ``ray.address``, so nothing it started outlives the test), SIGKILLed once its
    target — 2 Ray Train workers, checkpoints every 6 steps — has reported past its first
    checkpoint; then ``mutune resume``. The sweep finishes; the target repeats at most one
    checkpoint interval; no trial row added, no report row duplicated; the proxies untouched."""
    import signal
    import sqlite3
    import subprocess
    import sys
    from pathlib import Path

    import ray
    import yaml
    from typer.testing import CliRunner

    from mutune.services.cli import app

    d = tiny_config.model_dump(mode="json")
    d["ray"].update(address=ray.get_runtime_context().gcs_address, heartbeat_s=0.2,
                    lease_s=0.8)
    d["target"].update(checkpoint_every=6, num_workers=2, steps=60)
    # no confirmation designs: the target is what this test kills (designs are resumed in
    # test_resume_during_the_confirmation_design_keeps_what_it_had_trained)
    d["transfer"]["confirm_replicates"] = 0
    cfg_path = tmp_path / "sweep.yaml"
    cfg_path.write_text(yaml.safe_dump(d))
    db_file = tmp_path / "k.db"
    url = f"sqlite:///{db_file}"
    mutune = Path(sys.executable).with_name("mutune")
    driver = subprocess.Popen([str(mutune), "run", str(cfg_path), "--db", url,
                               "--out", str(tmp_path / "k")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    killed_at = None
    try:
        deadline = time.monotonic() + 600
        while killed_at is None and time.monotonic() < deadline:
            time.sleep(0.1)
            if driver.poll() is not None:
                pytest.fail("mutune run ended before the kill: "
                            + driver.stderr.read().decode()[-2000:])
            if not db_file.exists():
                continue
            try:
                with sqlite3.connect(db_file, timeout=1) as con:
                    (step,) = con.execute(
                        "SELECT max(r.step) FROM trial_reports r JOIN trials t "
                        "ON r.trial_id = t.id WHERE t.kind = 'target'").fetchone()
            except sqlite3.OperationalError:          # tables not created yet, or locked
                continue
            if step is not None and step >= 9:
                driver.send_signal(signal.SIGKILL)
                killed_at = step
        assert killed_at is not None, "the target never reported step 9"
        assert driver.wait(timeout=30) == -signal.SIGKILL
    finally:
        if driver.poll() is None:
            driver.kill()
    assert killed_at < 60
    with Store.open(url) as s:
        before = s.sweep_rows(1)
    assert before["target"]["status"] == "running"
    done = {t["id"]: t for t in before["trials"] if t["kind"] != "target"}
    assert done and all(t["status"] != "running" for t in done.values())
    time.sleep(0.8 + 0.2)                                          # past the lease
    out = CliRunner().invoke(app, ["resume", "1", "--db", url, "--out", str(tmp_path / "k")])
    assert out.exit_code == 0, out.output
    with Store.open(url) as s:
        rows = s.sweep_rows(1)
    assert rows["sweep"]["status"] == "completed" and rows["target"]["status"] == "completed"
    assert rows["target"]["id"] == before["target"]["id"]
    target = _resumed_target(before, rows, done)
    assert 0 <= target["repeated_steps"] <= 6                      # one checkpoint interval
    steps = [r["step"] for r in target["reports"]]
    assert steps == sorted(set(steps)) and steps[-1] == 60         # no duplicate report
    report = json.loads((tmp_path / "k" / "sweep-1" / "report.json").read_text())
    assert report["status"] == "completed"
    assert report["target"]["val_loss"] == target["reports"][-1]["metrics"]["val_loss"]
