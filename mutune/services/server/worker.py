"""The search server's worker: a thread that runs queued sweeps one at a time, each in a child
process that dies with the server (``PR_SET_PDEATHSIG``); a claimed sweep that already has
rows is finished by :func:`mutune.services.recovery.resume_sweep`."""
from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from mutune.errors import MutuneError

__all__ = ["Worker", "SweepCancelled", "run_claimed", "main"]

log = logging.getLogger("mutune.worker")

#: Seconds a cancelled child gets to stop at its next recorded event before SIGKILL.
CANCEL_GRACE_S = 15.0
#: The signal that asks a child to cancel its sweep (Ray's driver takes SIGTERM for itself).
CANCEL_SIGNAL = signal.SIGUSR2


class SweepCancelled(MutuneError):
    """The sweep was cancelled through the API while it ran."""


class _Cancel:
    """Set by CANCEL_SIGNAL in the child; checked by :class:`_AttachedRecorder` on every write."""
    requested = False


class _AttachedRecorder:
    """The store as the pipeline's recorder, bound to a queued sweep row; every write first checks
    for a pending cancellation."""

    def __init__(self, store: Any, sweep_id: int) -> None:
        self._store, self._sweep_id = store, sweep_id

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if _Cancel.requested and name != "sweep_finished":
                raise SweepCancelled(f"sweep {self._sweep_id} was cancelled")
            return attr(*args, **kwargs)
        return call

    def sweep_started(self, config, seed, provenance):
        return self._store.sweep_started(config, seed, provenance, sweep_id=self._sweep_id)


def _prepare_config(rows: dict[str, Any], ray_address: str | None) -> Any:
    from mutune.config import parse_config

    cfg = parse_config(rows["sweep"]["config"], source=f"sweep {rows['sweep']['id']}")
    if ray_address:
        cfg = cfg.model_copy(update={"ray": cfg.ray.model_copy(update={"address": ray_address})})
    return cfg


def _resume(sweep_id: int, *, store: Any, out_dir: Path,
            ray_address: str | None = None) -> int:
    """Finish sweep ``sweep_id``, left half done by a dead server, by ``mutune resume``'s path."""
    from mutune.services.recovery import resume_sweep

    log.info("sweep %s: resuming after a server restart", sweep_id)
    resume_sweep(store, sweep_id, out_dir=out_dir, recorder=_AttachedRecorder(store, sweep_id),
                 interrupted="the server running this sweep stopped", ray_address=ray_address)
    return sweep_id


def run_claimed(sweep_id: int, *, db: str, out_dir: Path, ray_address: str | None = None
                ) -> str:
    """Run a claimed sweep to its end in this process (resumed if it has rows); its final status."""
    from mutune.pipeline import run_pipeline
    from mutune.services.store import Store

    with Store.open(db, upgrade=False) as store:
        try:
            counts = store.counts(sweep_id)
            if counts["provenance"] or counts["proxy_sweeps"] or counts["trials"]:
                _resume(sweep_id, store=store, out_dir=out_dir, ray_address=ray_address)
            else:
                cfg = _prepare_config(store.sweep_rows(sweep_id), ray_address)
                run_pipeline(cfg, _AttachedRecorder(store, sweep_id), out_dir=out_dir)
            return "completed"
        except Exception as err:
            if _Cancel.requested:  # SweepCancelled, possibly wrapped by Ray Tune
                store.mark_interrupted(sweep_id, "cancelled")
                store.sweep_finished(sweep_id, "cancelled", "cancelled through the API")
                return "cancelled"
            if not isinstance(err, MutuneError):
                raise
            log.error("sweep %s failed: %s", sweep_id, err)
            store.mark_interrupted(sweep_id, f"the sweep failed: {err}"[:500])
            return "failed"


def _die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when its parent thread dies (Linux); exit at once if it is gone."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:  # not Linux: the sweep may outlive a killed server
        pass
    if os.getppid() != parent_pid:
        os._exit(3)


def main(argv: list[str] | None = None) -> int:
    """Child-process entry: ``python -m mutune.services.server.worker SWEEP_ID --db URL --out
    DIR``."""
    p = argparse.ArgumentParser(prog="python -m mutune.services.server.worker")
    p.add_argument("sweep_id", type=int)
    p.add_argument("--db", required=True)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--ray-address", default=None)
    p.add_argument("--parent-pid", type=int, default=None)
    a = p.parse_args(argv)
    if a.parent_pid:
        _die_with_parent(a.parent_pid)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")

    def on_cancel(signum: int, frame: Any) -> None:
        log.info("sweep %s: cancel requested", a.sweep_id)
        _Cancel.requested = True
    signal.signal(CANCEL_SIGNAL, on_cancel)
    status = run_claimed(a.sweep_id, db=a.db, out_dir=a.out, ray_address=a.ray_address)
    log.info("sweep %s: %s", a.sweep_id, status)
    return 0 if status != "failed" else 1


class Worker:
    """Runs queued sweeps one at a time (a thread of the server process)."""

    def __init__(self, store: Any, *, db: str, out_dir: Path, ray_address: str | None = None,
                 poll_s: float = 1.0) -> None:
        self.store, self.db, self.out_dir = store, db, Path(out_dir)
        self.ray_address, self.poll_s = ray_address, poll_s
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._cancel: set[int] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen | None = None
        self.current: int | None = None
        self.requeued: list[int] = []

    def start(self) -> None:
        """Re-queue sweeps left ``running`` by a dead server, then start the thread (one worker per
        database)."""
        self.requeued = self.store.requeue_running()
        if self.requeued:
            log.info("re-queued sweeps left running: %s", self.requeued)
        self._thread = threading.Thread(target=self._loop, name="mutune-worker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop taking sweeps; a running child is killed and its sweep stays ``running`` to
        resume."""
        self._stop.set()
        self._wake.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
        if self._thread is not None:
            self._thread.join(timeout)

    def notify(self) -> None:
        """A sweep was queued: look at the queue now."""
        self._wake.set()

    def cancel(self, sweep_id: int) -> bool:
        """Cancel ``sweep_id`` if this worker is running it; True if it was."""
        with self._lock:
            if self.current != sweep_id:
                return False
            self._cancel.add(sweep_id)
        self._wake.set()
        return True

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                sweep_id = self.store.claim_queued()
            except MutuneError as err:
                log.error("claiming a queued sweep failed: %s", err)
                sweep_id = None
            if sweep_id is None:
                self._wake.wait(self.poll_s)
                self._wake.clear()
                continue
            try:
                self._run(sweep_id)
            except Exception:  # the worker must survive one sweep's failure
                log.exception("sweep %s: the worker failed to run it", sweep_id)

    def _run(self, sweep_id: int) -> None:
        base = self.out_dir / f"sweep-{sweep_id}"
        base.mkdir(parents=True, exist_ok=True)
        attempt = base / f"attempt-{sum(1 for _ in base.glob('attempt-*')) + 1}"
        attempt.mkdir()
        cmd = [sys.executable, "-m", "mutune.services.server.worker", str(sweep_id),
               "--db", self.db,
               "--out", str(attempt), "--parent-pid", str(os.getpid())]
        if self.ray_address:
            cmd += ["--ray-address", self.ray_address]
        with self._lock:
            self.current = sweep_id
        with open(attempt / "worker.log", "wb") as logf:
            self._proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL)
            signalled_at: float | None = None
            while self._proc.poll() is None:
                self._wake.wait(0.5)
                self._wake.clear()
                if self._stop.is_set():
                    return
                if sweep_id in self._cancel and signalled_at is None:
                    self._proc.send_signal(CANCEL_SIGNAL)
                    signalled_at = time.monotonic()
                elif signalled_at is not None and \
                        time.monotonic() - signalled_at > CANCEL_GRACE_S:
                    self._proc.kill()
        rc = self._proc.returncode
        with self._lock:
            self.current, self._proc = None, None
            cancelled = sweep_id in self._cancel
            self._cancel.discard(sweep_id)
        if self._stop.is_set():
            return
        status = self.store.sweep_summary(sweep_id)["status"]
        if cancelled and status not in ("completed", "cancelled"):
            self.store.mark_interrupted(sweep_id, "cancelled")
            self.store.sweep_finished(sweep_id, "cancelled", "cancelled through the API")
        elif status == "running":  # the child died without recording the sweep's end
            self.store.mark_interrupted(sweep_id, "the worker process ended")
            self.store.sweep_finished(sweep_id, "failed",
                                      f"the worker process exited with code {rc}; "
                                      f"log: {attempt / 'worker.log'}")


if __name__ == "__main__":
    sys.exit(main())
