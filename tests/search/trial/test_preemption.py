"""Spot preemption under real Ray: a notice — SIGTERM to the trial's worker process, a notice
file, or a notice URL on 127.0.0.1 in either cloud style — makes the trial checkpoint the step
it reached and end; the driver retries it from that checkpoint without consuming
``ray.max_failures`` (0 here), and its recorded reports equal an uninterrupted trial's bit
for bit. A SIGKILL is a failure. The notice sources themselves are checked without Ray."""
from __future__ import annotations

import http.server
import itertools
import os
import signal
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from mutune.pipeline.recording import MemoryRecorder
from mutune.proxies.task import ProxyTask, load_task_data
from mutune.search.trial import preemption
from mutune.search.trial.preemption import NoticeWatcher, Preemption

# one test process for this module: its module-scoped fixture is built once (pyproject's
# --dist loadgroup)
pytestmark = pytest.mark.xdist_group("search.trial.test_preemption")

POINT = {"hparams": {"lr": 0.01}, "seed": 1234, "index": 0}
#: long enough that a notice posted at step 3 lands mid-trial (a step takes about a millisecond)
MAX_T = 300


def _ray_cfg(tiny_config, **preempt):
    # the notices are posted at the first report the driver sees at or past step 3: a short
    # hold (mutune/search/trial/report_hold.py) still lets reports travel together, and the
    # preempted report brings the held ones before it, yet the trial cannot finish first
    return tiny_config.ray.model_copy(update={
        "max_failures": 0, "max_concurrent_trials": 1, "report_hold_s": 0.05,
        "preemption": tiny_config.ray.preemption.model_copy(update=preempt)})


def _sweep(tiny_config, tmp_path, name, *, ray_cfg, callbacks=()):
    """One trial of POINT to MAX_T on the session's Ray cluster; (outcome, recorder)."""
    from tests.search.runs import run_trials

    task = ProxyTask(tiny_config.model, tiny_config.train,
                     load_task_data(tiny_config)).with_base_shapes()
    rec = MemoryRecorder()
    out = run_trials([dict(POINT)], task=task, width=16, max_t=MAX_T, recorder=rec,
                     sweep_id=1, proxy_sweep_id=None, kind="proxy", scheduler=None,
                     metric="val_loss", mode="min", ray_cfg=ray_cfg, storage=tmp_path / name,
                     name=name, seq=itertools.count(1), callbacks=list(callbacks))
    return out, rec


def _trajectory(rec):
    """(step, val_loss, train_loss, samples) of every recorded report: no timing field."""
    return [(r["step"], r["metrics"]["val_loss"], r["metrics"]["train_loss"],
             r["metrics"]["samples"]) for r in rec.of("trial_reported")]


class _AtStep:
    """A Ray Tune callback that runs ``act(result)`` once, at the first report at or past
    ``step`` (``result["pid"]`` is the trial's worker process)."""

    def __init__(self, step, act):
        from ray.tune import Callback

        class _Cb(Callback):
            def on_trial_result(cb, iteration, trials, trial, result, **info):
                if not self.done and result.get("step", 0) >= step:
                    self.done = True
                    act(result)
        self.done = False
        self.callback = _Cb()


@pytest.fixture(scope="module")
def reference(ray_local, tmp_path_factory):
    from tests.conftest import make_tiny_config

    cfg = make_tiny_config()
    out, rec = _sweep(cfg, tmp_path_factory.mktemp("ref"), "ref", ray_cfg=_ray_cfg(cfg))
    assert out.trials[0].status == "completed"
    return _trajectory(rec)


def _assert_preempted_and_retried(out, rec, reference):
    (t,) = out.trials
    assert t.status == "completed", (t.status, t.reason)
    assert t.timing["preemptions"] == 1 and t.timing["restarts"] == 0
    assert t.repeated_steps == 0                     # a graceful notice loses no step
    assert t.timing["recovery_s"] > 0                # the retry's set-up and restore
    # the retry continued the same row, from the checkpoint of the step reached
    assert len(rec.of("trial_started")) == 1
    (resumed,) = rec.of("trial_resumed")
    assert "preempted at step" in resumed["reason"]
    restored = [r for r in t.reports if r.get("restored_step")]
    assert restored and restored[0]["restored_step"] > 3
    assert _trajectory(rec) == reference             # bit for bit, timing excluded
    (fin,) = rec.of("trial_finished")
    assert fin["status"] == "completed" and fin["timing"]["preemptions"] == 1


@pytest.mark.slow
def test_sigterm_to_the_trials_worker_preempts_and_retries_without_a_failure(
        ray_local, tiny_config, tmp_path, reference):
    kill = _AtStep(3, lambda r: os.kill(int(r["pid"]), signal.SIGTERM))
    out, rec = _sweep(tiny_config, tmp_path, "term", ray_cfg=_ray_cfg(tiny_config),
                      callbacks=[kill.callback])
    assert kill.done
    _assert_preempted_and_retried(out, rec, reference)


@pytest.mark.slow
def test_a_notice_file_preempts_the_same_way(ray_local, tiny_config, tmp_path, reference):
    flag = tmp_path / "notice"
    touch = _AtStep(3, lambda r: flag.write_text("preempt"))
    out, rec = _sweep(tiny_config, tmp_path, "file",
                      ray_cfg=_ray_cfg(tiny_config, notice_file=str(flag), poll_s=0.01),
                      callbacks=[touch.callback])
    assert touch.done
    _assert_preempted_and_retried(out, rec, reference)


class _MetadataServer:
    """A cloud metadata service on 127.0.0.1: ``status`` style 404 until the notice is posted
    (``post()`` or POST /post), then 200 (with a session token from PUT /token required, as
    IMDSv2); ``body`` style 200 ``FALSE`` until then, ``TRUE`` after."""

    def __init__(self, style):
        self.style, self.posted, self.token_puts = style, False, 0
        server = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                return None

            def do_PUT(self):
                server.token_puts += 1
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"tok-123")

            def do_POST(self):                  # /post: the notice is posted
                server.posted = True
                self.send_response(200)
                self.end_headers()

            def do_GET(self):
                if server.style == "status":
                    ok = (server.posted and
                          self.headers.get("X-aws-ec2-metadata-token") == "tok-123")
                    self.send_response(200 if ok else 404)
                    self.end_headers()
                    self.wfile.write(b'{"action": "terminate"}' if ok else b"")
                else:
                    self.send_response(200)
                    self.end_headers()
                    self.wfile.write(b"TRUE" if server.posted else b"FALSE")

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def post(self):
        self.posted = True

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.slow
@pytest.mark.parametrize("style", ["status", "body"])
def test_a_notice_url_in_either_cloud_style_preempts_the_same_way(
        ray_local, tiny_config, tmp_path, reference, style):
    srv = _MetadataServer(style)
    url = srv.url
    try:   # Ray pickles its callbacks: this one posts the notice over HTTP
        post = _AtStep(3, lambda r: urllib.request.urlopen(
            urllib.request.Request(url + "/post", method="POST"), timeout=5).close())
        extra = {"token_url": srv.url + "/token"} if style == "status" else {}
        out, rec = _sweep(tiny_config, tmp_path, f"url-{style}",
                          ray_cfg=_ray_cfg(tiny_config, notice_url=srv.url + "/notice",
                                           notice_style=style, poll_s=0.01, **extra),
                          callbacks=[post.callback])
    finally:
        srv.close()
    assert post.done
    if style == "status":
        assert srv.token_puts > 0
    _assert_preempted_and_retried(out, rec, reference)


@pytest.mark.slow
def test_a_sigkill_is_a_failure_that_consumes_max_failures(ray_local, tiny_config, tmp_path):
    kill = _AtStep(3, lambda r: os.kill(int(r["pid"]), signal.SIGKILL))
    out, rec = _sweep(tiny_config, tmp_path, "kill", ray_cfg=_ray_cfg(tiny_config),
                      callbacks=[kill.callback])
    (t,) = out.trials
    assert t.status == "failed" and t.timing["preemptions"] == 0


def _wait_for(p, timeout_s=5.0):
    """Until the notice reaches ``p`` (a Preemption), at most ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while not p.requested and time.monotonic() < deadline:
        time.sleep(0.01)


def test_notice_sources_without_ray(tmp_path):
    """The file and both URL styles post one notice each, edge-triggered: a notice already
    up when the watcher starts is not new; the loop's flag clears when consumed."""
    flag = tmp_path / "n"
    with Preemption() as p:
        assert not p.requested
        with NoticeWatcher({"notice_file": str(flag), "poll_s": 0.02}):
            flag.touch()
            _wait_for(p)
        assert p.requested and p.reason == f"notice file {flag}"
        p.consume()
        assert not p.requested
        with NoticeWatcher({"notice_file": str(flag), "poll_s": 0.02}):
            time.sleep(0.2)                      # still up: not a new notice
        assert not p.requested
    for style in ("status", "body"):
        srv = _MetadataServer(style)
        token = srv.url + "/token" if style == "status" else None
        try:
            assert preemption._poll_url(srv.url + "/n", style, token, 1.0) is False
            with Preemption() as p, NoticeWatcher({"notice_url": srv.url + "/n",
                                                   "notice_style": style, "token_url": token,
                                                   "poll_s": 0.02}):
                srv.post()
                _wait_for(p)
                assert p.requested and p.reason == f"notice at {srv.url}/n"
                p.consume()
        finally:
            srv.close()
    # a URL that cannot be asked says nothing either way (not "no notice")
    assert preemption._poll_url("http://127.0.0.1:9/none", "status", None, 0.5) is None


def test_a_notice_url_that_stops_answering_does_not_fire_twice():
    """Edge-triggered across failed polls: the notice posted (fires once), the URL then
    unreachable for a while and back with the notice still up — no second notice (a timed-out
    poll on a loaded node once looked like the notice going away, and the retried trial was
    preempted again)."""
    srv = _MetadataServer("body")
    try:
        with Preemption() as p:
            w = NoticeWatcher({"notice_url": srv.url + "/n", "notice_style": "body",
                               "poll_s": 0.02})
            with w:
                srv.post()
                _wait_for(p)
                p.consume()
                good, w.url = w.url, "http://127.0.0.1:9/none"      # unreachable
                time.sleep(0.2)
                w.url = good                                        # back, still posted
                time.sleep(0.3)
            assert not p.requested
    finally:
        srv.close()


def test_the_loop_ends_preempted_with_a_checkpointed_report(tiny_config, tmp_path):
    """A notice posted while the loop trains: it finishes the step, checkpoints it, reports
    it with ``preempted`` = 1 and returns ``preempted``; the notice is spent."""
    from mutune.training import run_loop

    task = ProxyTask(tiny_config.model, tiny_config.train,
                     load_task_data(tiny_config)).with_base_shapes()
    got = []

    def report(m, folder):
        got.append((m, folder))
        if m["step"] == 6:
            preemption.notice("test")

    cfg = {"width": 16, "max_t": MAX_T, "threads": 1, "gpus": 0, "point": dict(POINT)}
    status = run_loop(cfg, task, report=report, checkpoint_root=tmp_path)
    assert status == "preempted"
    last, folder = got[-1]
    assert last["step"] == 7 and last["preempted"] == 1.0 and last["at_eval"] == 0.0
    assert folder is not None and Path(folder).name == "step_000000007"
    assert not Preemption().requested
