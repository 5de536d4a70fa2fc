"""Remote checkpoint storage (``ray.storage``) on a shared folder and on an S3-compatible server
on 127.0.0.1 (moto's server mode), through the same pyarrow code path as real S3: round trips,
background uploads, a worker killed during an upload, and — under real Ray — a preempted trial
whose local checkpoint is gone restoring from remote storage at the same step."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mutune.search.trial.checkpoint import STATE_FILE
from mutune.search.trial.remote import CheckpointStore, Uploader, shown

# one test process for this module: its module-scoped fixture is built once (pyproject's
# --dist loadgroup)
pytestmark = pytest.mark.xdist_group("search.trial.test_remote_storage")


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3 server on 127.0.0.1 with a bucket; yields the ``s3://…`` prefix (credentials
    in the URI, so Ray workers started before this fixture can read it too)."""
    moto_server = pytest.importorskip("moto.server", reason="moto[server] is a test extra")
    import pyarrow.fs as pafs

    srv = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    _, port = srv.get_host_and_port()
    query = f"endpoint_override=127.0.0.1:{port}&scheme=http&region=us-east-1"
    fs, _ = pafs.FileSystem.from_uri(f"s3://k:s@ckpts?{query}&allow_bucket_creation=true")
    fs.create_dir("ckpts")
    yield lambda prefix: f"s3://k:s@ckpts/{prefix}?{query}"
    srv.stop()


@pytest.fixture(params=["shared", "s3"])
def storage(request, tmp_path):
    """A storage URI of each kind, fresh per test."""
    if request.param == "shared":
        return str(tmp_path / "shared")
    return request.getfixturevalue("s3_server")(tmp_path.name)


def _state(path: Path, n: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(n))
    return path


def test_round_trip_latest_and_retention(storage, tmp_path):
    store = CheckpointStore(storage, "run")
    assert store.latest("w16-t0") is None and store.fetch("w16-t0", tmp_path / "x") is None
    files = {s: _state(tmp_path / f"l{s}" / STATE_FILE, 1000 + s) for s in (10, 20, 30)}
    for step, f in files.items():
        assert store.put("w16-t0", step, f) == f.stat().st_size
    assert store.latest("w16-t0") == 30
    assert store.steps("w16-t0") == [20, 30]           # the newest and the one before
    step, folder = store.fetch("w16-t0", tmp_path / "got")
    assert step == 30 and (folder / STATE_FILE).read_bytes() == files[30].read_bytes()
    log = _state(tmp_path / "log.json", 10)
    store.put_log("w16-t0", log)
    assert store.get_log("w16-t0") == log.read_bytes() and store.get_log("other") is None


def test_the_uploader_keeps_the_newest_and_flush_waits_for_it(storage, tmp_path):
    store = CheckpointStore(storage, "run")
    up = Uploader(store, "t", min_interval_s=0.0)
    try:
        for s in range(1, 6):
            up.submit(s, _state(tmp_path / f"s{s}" / STATE_FILE, 5000))
        assert up.flush(60)
        assert up.uploaded_step == 5 and store.latest("t") == 5
        assert 1 <= up.uploads <= 5 and up.upload_s > 0 and up.error is None
    finally:
        up.close()


def test_spaced_uploads_wait_but_a_flush_does_not(tmp_path):
    store = CheckpointStore(str(tmp_path / "shared"), "run")
    up = Uploader(store, "t", min_interval_s=3600.0)
    try:
        up.submit(1, _state(tmp_path / "a" / STATE_FILE, 100))
        assert up.flush(30) and store.latest("t") == 1        # the first goes at once
        up.submit(2, _state(tmp_path / "b" / STATE_FILE, 100))
        time.sleep(0.3)
        assert store.latest("t") == 1                          # spaced: not yet
        assert up.flush(30) and store.latest("t") == 2         # a flush sends it now
    finally:
        up.close()


def test_a_failed_upload_is_kept_as_an_error_and_the_next_one_goes(tmp_path):
    store = CheckpointStore(str(tmp_path / "shared"), "run")
    up = Uploader(store, "t")
    try:
        up.submit(1, tmp_path / "missing" / STATE_FILE)
        assert up.flush(30) and "step 1" in up.error and store.latest("t") is None
        up.submit(2, _state(tmp_path / "b" / STATE_FILE, 100))
        assert up.flush(30) and store.latest("t") == 2
    finally:
        up.close()


def test_a_resume_fetches_the_newest_upload_at_or_before_its_last_recorded_step(storage,
                                                                                tmp_path):
    """A driver that died after a trial uploaded a checkpoint but before it recorded the
    report (or the reports held back before it) left ``LATEST`` past the trial's last
    recorded step: the resume takes the kept upload before it, or nothing."""
    store = CheckpointStore(storage, "run")
    files = {s: _state(tmp_path / f"l{s}" / STATE_FILE, 100 + s) for s in (10, 20, 30)}
    for step, f in files.items():
        store.put("t", step, f, owner="ray-a")
    assert store.entry_at_most("t") == store.entry_at_most("t", 30) == (30, "ray-a")
    assert store.entry_at_most("t", 29) == (20, "ray-a") == store.entry_at_most("t", 20)
    assert store.entry_at_most("t", 19) is None               # step 10 was dropped
    assert store.entry_at_most("other", 100) is None
    step, folder = store.fetch("t", tmp_path / "got", at_most=25)
    assert step == 20 and (folder / STATE_FILE).read_bytes() == files[20].read_bytes()
    assert store.fetch("t", tmp_path / "none", at_most=15) is None


def test_the_remote_tier_holds_a_resume_to_its_last_recorded_step(storage, tmp_path,
                                                                   monkeypatch):
    """``mutune resume`` continues a trial with ``restore_from = CONTINUE`` and its last
    recorded step: neither the node's cache nor remote storage may hand it a later
    checkpoint; without that step the newest of the two wins, as before."""
    import tempfile

    from mutune.search.trial.remote_trial import CONTINUE, RemoteTier, restore_dir_for

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    store = CheckpointStore(storage, "run")
    remote = {s: _state(tmp_path / f"r{s}" / STATE_FILE, 200 + s) for s in (20, 30)}
    for step, f in remote.items():
        store.put("w16-t0", step, f, owner="old")
    tier = RemoteTier(store, "w16-t0", "new", min_interval_s=0.0, stop_at=set(), max_t=90)
    cached = _state(tier.cache_dir / "step_000000040" / STATE_FILE, 340)   # this node's
    try:
        with contextlib.ExitStack() as stack:
            def where(point, sub):
                return restore_dir_for(None, point, tier, str(tmp_path / sub), stack)

            assert where({"restore_from": CONTINUE}, "a") == str(cached.parent)
            got = Path(where({"restore_from": CONTINUE, "restore_at_most": 35}, "b"))
            assert (got / STATE_FILE).read_bytes() == remote[30].read_bytes()
            got = Path(where({"restore_from": CONTINUE, "restore_at_most": 29}, "c"))
            assert (got / STATE_FILE).read_bytes() == remote[20].read_bytes()
            assert tier.remote_restore_s > 0                     # downloaded
            assert where({"restore_from": CONTINUE, "restore_at_most": 12}, "d") is None
            # a cached checkpoint at or before the step is taken before an older remote one
            _state(tier.cache_dir / "step_000000025" / STATE_FILE, 325)
            assert where({"restore_from": CONTINUE, "restore_at_most": 29}, "e") == str(
                tier.cache_dir / "step_000000025")
    finally:
        tier.close(finished=True)


def test_credentials_are_masked_in_messages():
    assert shown("s3://key:secret@bucket/p?x=1") == "s3://***@bucket/p?x=1"
    assert shown("/mnt/shared") == "/mnt/shared"


@pytest.mark.slow
def test_a_kill_during_an_upload_leaves_the_previous_checkpoint_restorable(storage, tmp_path):
    """A process uploading a large checkpoint is SIGKILLed mid-upload: LATEST still names the
    previous step, whose file reads back whole."""
    store = CheckpointStore(storage, "run")
    first = _state(tmp_path / "a" / STATE_FILE, 4096)
    store.put("t", 10, first)
    big = _state(tmp_path / "b" / STATE_FILE, 256 << 20)
    code = textwrap.dedent(f"""
        import sys
        from mutune.search.trial.remote import CheckpointStore
        store = CheckpointStore({storage!r}, "run")
        print("uploading", flush=True)
        store.put("t", 20, {str(big)!r})
        print("done", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "uploading"
    if not storage.startswith("s3://"):     # until its temporary file is being written
        root = Path(storage) / "run" / "t"
        deadline = time.monotonic() + 60
        while not list(root.glob("step_000000020/.*.tmp")) and time.monotonic() < deadline:
            time.sleep(0.005)
    else:
        time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    rest = proc.stdout.read()
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and "done" not in rest
    assert store.latest("t") == 10
    step, folder = store.fetch("t", tmp_path / "got")
    assert step == 10 and (folder / STATE_FILE).read_bytes() == first.read_bytes()


# ---------------------------------------------------------------- under real Ray

@pytest.mark.slow
def test_a_preempted_trial_without_its_local_copy_restores_from_remote_storage(
        ray_local, tiny_config, tmp_path, storage):
    """The notice file preempts the trial at step ≥ 3; its local checkpoints (Ray's copy on
    this node) are deleted before the retry; the retry downloads the remote checkpoint and
    continues at the same step, its reports equal to an uninterrupted trial's."""
    from ray.tune import Callback

    from tests.search.trial.test_preemption import (_AtStep, _assert_preempted_and_retried,
                                              _ray_cfg, _sweep, _trajectory)

    flag = tmp_path / "notice"

    class DropLocal(Callback):
        """On the preempted trial's end: every checkpoint Ray holds of it is removed."""
        dropped: list = []

        def on_trial_complete(self, iteration, trials, trial, **info):
            for d in Path(trial.path).glob("checkpoint_*"):
                shutil.rmtree(d)
                DropLocal.dropped.append(d.name)

    touch = _AtStep(3, lambda r: flag.write_text("preempt"))
    base = _ray_cfg(tiny_config, notice_file=str(flag), poll_s=0.01)
    out, rec = _sweep(tiny_config, tmp_path, "remote",
                      ray_cfg=base.model_copy(update={"storage": storage}),
                      callbacks=[touch.callback, DropLocal()])
    ref_out, ref = _sweep(tiny_config, tmp_path, "remote-ref", ray_cfg=_ray_cfg(tiny_config))
    assert touch.done and ref_out.trials[0].status == "completed"
    _assert_preempted_and_retried(out, rec, _trajectory(ref))
    (t,) = out.trials
    restored = [r for r in t.reports if r.get("restored_step")]
    assert restored[0].get("remote_restore_s", 0) > 0   # downloaded, not read locally
    assert t.timing["upload_s"] > 0
    store = CheckpointStore(storage, "remote")
    assert store.latest(str(t.key)) is not None and store.get_log(str(t.key)) is not None


@pytest.mark.slow
def test_a_resumed_trial_under_ray_restores_at_or_before_its_last_recorded_step(
        ray_local, tiny_config, tmp_path):
    """A first run uploads its checkpoints (every 100 steps; the newest two are kept); a second
    continues the trial as ``mutune resume`` does where its folder is not on the node
    (``restore_from = CONTINUE``), with ``LATEST`` past its last recorded step: the trial
    downloads the upload kept before ``LATEST`` and its reports from there equal the first
    run's, bit for bit."""
    import itertools

    from mutune.pipeline.recording import MemoryRecorder
    from mutune.proxies.task import ProxyTask, load_task_data
    from tests.search.runs import run_trials
    from mutune.search.trial.remote_trial import CONTINUE
    from tests.search.trial.test_preemption import MAX_T, POINT, _ray_cfg, _trajectory

    storage = str(tmp_path / "shared")
    task = ProxyTask(tiny_config.model, tiny_config.train,
                     load_task_data(tiny_config)).with_base_shapes()
    ray_cfg = _ray_cfg(tiny_config).model_copy(update={"storage": storage})

    def sweep(name, point):
        rec = MemoryRecorder()
        out = run_trials([point], task=task, width=16, max_t=MAX_T, recorder=rec, sweep_id=1,
                         proxy_sweep_id=None, kind="proxy", scheduler=None, metric="val_loss",
                         mode="min", ray_cfg=ray_cfg, storage=tmp_path / name, name="run",
                         seq=itertools.count(1), checkpoint_every=100)
        return out, rec

    key = "w16-t0"
    first, rec = sweep("first", {**POINT, "key": key})
    store = CheckpointStore(storage, "run")
    kept = store.steps(key)
    assert first.trials[0].status == "completed" and len(kept) == 2
    assert store.latest(key) == kept[1] and 0 < kept[0] < kept[1] < MAX_T
    second, rec2 = sweep("second", {**POINT, "key": key, "restore_from": CONTINUE,
                                    "restore_at_most": kept[1] - 1})
    (t,) = second.trials
    assert t.status == "completed" and t.reports[0]["restored_step"] == kept[0]
    assert t.reports[0]["remote_restore_s"] > 0            # downloaded, not read locally
    # Ray's trial folder is named by the driver's key (mutune.search.backends.ray_tune.run)
    name = Path(t.trial_dir).name
    assert name.startswith(f"{key}_") and "=" not in name and name != Path(
        first.trials[0].trial_dir).name
    assert _trajectory(rec2) == [r for r in _trajectory(rec) if r[0] > kept[0]]
