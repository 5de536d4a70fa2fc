"""Sweeps run by the server's worker on a real local Ray (tiny configs): completion through the
client, cancelling a running sweep, and SIGKILL of the server mid-sweep followed by a restart
that finishes the sweep with no lost and no duplicated rows."""
from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

import mutune
from mutune.services.report import build_report
from mutune.services.store import Store
from tests.conftest import make_tiny_config
from tests.services.conftest import make_token, start_server

pytestmark = pytest.mark.slow


def _tiny():
    """The tiny config without confirmation designs: these tests are about the server (a
    sweep's rows across a kill, cancel, the queue), not the designs, which the pipeline and
    resume tests run."""
    cfg = make_tiny_config()
    return cfg.model_copy(update={
        "ray": cfg.ray.model_copy(update={"num_cpus": 2}),
        "transfer": cfg.transfer.model_copy(update={"confirm_replicates": 0})})


def _children(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` and that run mutune's worker."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"mutune.services.server.worker" in cmd and " Z " not in stat[:60]:
            out.append(int(d.name))
    return out


def _until(predicate, timeout: float, what: str, poll: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_submitted_sweeps_complete_and_a_running_one_cancels(tmp_path):
    db = f"sqlite:///{tmp_path / 'mutune.db'}"
    token = make_token(db, "alpha")
    server = start_server(db, tmp_path, worker=True)
    try:
        client = mutune.Client(server.url, token)
        first = client.submit(_tiny())
        second = client.submit(_tiny())
        final = first.wait(timeout=400, poll_s=1.0, progress=False)
        assert final["status"] == "completed", final
        with Store.open(db) as store:
            rows = store.sweep_rows(first.id)
        assert rows["sweep"]["project"] == "alpha"
        assert first.report() == json.loads(json.dumps(build_report(rows)))
        # 4 sweep trials per width (no confirmation design), and the target
        assert len(first.trials()) == 4 * 2 + 1
        assert final["progress"]["fraction"] == 1.0 and final["target"]["status"] == "completed"

        _until(lambda: second.status()["progress"]["trials_running"] > 0, 120,
               "the second sweep's trials to run")
        assert second.cancel()["status"] == "cancelling"
        try:
            st = _until(lambda: (s := second.status())["status"] == "cancelled" and s, 60,
                        "the cancelled sweep to stop")
        except AssertionError as err:
            raise AssertionError(f"{err}; last status {second.status()}; server log: "
                                 f"{server.log.read_text()[-3000:]}") from None
        assert st["progress"]["trials_running"] == 0
        _until(lambda: not _children(server.proc.pid), 30, "the cancelled child to exit")
    finally:
        server.kill(signal.SIGTERM)


def _snapshot(db: str, sweep_id: int) -> dict:
    with Store.open(db) as store:
        rows = store.sweep_rows(sweep_id)
    return rows


def test_sigkill_mid_sweep_then_restart_resumes_with_no_lost_or_duplicated_rows(store_url,
                                                                              tmp_path):
    """The server killed while the second width runs; the next server resumes that width —
    the same proxy sweep row, its running trials continued from their checkpoints under their
    own rows — by the recovery path ``mutune resume`` takes: no width is swept twice."""
    db = store_url
    token = make_token(db, "alpha")
    server = start_server(db, tmp_path, worker=True, name="before")
    from mutune.config import parse_config

    # max_t 81: a width-32 trial that survives the rungs trains long enough past its step-6
    # checkpoint for the poll to catch it running
    d = _tiny().model_dump(mode="json")
    d["train"]["checkpoint_every"] = 3
    d["search"]["scheduler"]["max_t"] = 81
    cfg = parse_config(d)
    try:
        sweep = mutune.Client(server.url, token).submit(cfg)

        def checkpointed_trial_of_the_second_width_running():
            rows = _snapshot(db, sweep.id)
            second = [p["id"] for p in rows["proxy_sweeps"] if p["width"] == 32]
            return second and any(t["status"] == "running" and t["proxy_sweep_id"] in second
                                  and t["kind"] == "proxy"
                                  and max((r["step"] for r in t["reports"]), default=0) >= 6
                                  for t in rows["trials"])
        _until(checkpointed_trial_of_the_second_width_running, 300,
               "a trial of the second width to run past its first checkpoint", poll=0.2)
        workers = _children(server.proc.pid)
        assert len(workers) == 1
        server.kill(signal.SIGKILL)
        _until(lambda: not os.path.exists(f"/proc/{workers[0]}") or
               "Z" in Path(f"/proc/{workers[0]}/stat").read_text().split()[2], 20,
               "the worker child to die with the server")
    finally:
        if server.proc.poll() is None:
            server.kill()
    before = _snapshot(db, sweep.id)
    assert before["sweep"]["status"] == "running"
    interrupted = {t["id"] for t in before["trials"] if t["status"] == "running"
                   and t["kind"] == "proxy"}
    assert interrupted
    reports_before = {(t["id"], r["step"]) for t in before["trials"] for r in t["reports"]}
    events_before = {(e["trial_id"], e["milestone"]) for e in before["events"]}

    server = start_server(db, tmp_path, worker=True, name="after")
    try:
        final = mutune.Client(server.url, token).sweep(sweep.id).wait(timeout=400,
                                                                      progress=False)
    finally:
        server.kill(signal.SIGTERM)
    assert final["status"] == "completed", final
    after = _snapshot(db, sweep.id)

    # nothing lost: every trial, report and decision recorded before the kill is still there
    assert {t["id"] for t in before["trials"]} <= {t["id"] for t in after["trials"]}
    assert reports_before <= {(t["id"], r["step"]) for t in after["trials"]
                              for r in t["reports"]}
    assert events_before <= {(e["trial_id"], e["milestone"]) for e in after["events"]}
    assert {p["id"] for p in before["proxy_sweeps"]} <= {p["id"] for p in after["proxy_sweeps"]}
    # no width was swept again: the same two proxy sweep rows, both completed, and the
    # interrupted width kept its trials and has exactly num_samples of them
    assert [(p["id"], p["width"]) for p in after["proxy_sweeps"]] == \
        [(p["id"], p["width"]) for p in before["proxy_sweeps"]]
    assert {p["status"] for p in after["proxy_sweeps"]} == {"completed"}
    second = next(p["id"] for p in after["proxy_sweeps"] if p["width"] == 32)
    assert len([t for t in after["trials"] if t["proxy_sweep_id"] == second
                and t["kind"] == "proxy"]) == 4
    # the trials running at the kill continued under their own rows, from their checkpoints
    by_id = {t["id"]: t for t in after["trials"]}
    assert all(by_id[i]["status"] != "running" for i in interrupted)
    assert any(by_id[i]["restarts"] >= 1 and any(
        float(r["metrics"].get("restored_step", 0)) > 0 for r in by_id[i]["reports"])
        for i in interrupted)
    assert not any(t["status"] == "running" for t in after["trials"])
    # nothing duplicated: one report per (trial, step), one decision per (trial, rung), one
    # sequence number per report/decision, one rule per hyperparameter, one law, one target
    pairs = [(t["id"], r["step"]) for t in after["trials"] for r in t["reports"]]
    assert len(pairs) == len(set(pairs))
    seqs = [r["seq"] for t in after["trials"] for r in t["reports"]] + \
        [e["seq"] for e in after["events"]]
    assert len(seqs) == len(set(seqs))
    assert sorted(r["hyperparameter"] for r in after["rules"]) == sorted(
        _tiny().search.space)
    assert Counter(x["kind"] for x in after["laws"]) == Counter({"loss_vs_params": 1})
    assert Counter(x["kind"] for x in after["checks"]) == Counter(
        {"preflight": 1, "importance": 1, "gate": 1,
         **({"target_watch": 1} if any(x["kind"] == "target_watch" for x in after["checks"])
            else {})})
    names = [e["name"] for e in after["ledger"] if e["scope"] == "sweep"]
    assert len(names) == len(set(names))
    with Store.open(db) as store:
        assert store.counts(sweep.id)["target_runs"] == 1
        assert store.counts(sweep.id)["provenance"] == 1
    report = build_report(after)
    assert [p["width"] for p in report["proxies"]] == [16, 32]
    assert report["proxies"][1]["trials"] == 4
    assert report["target"]["status"] == "completed"
