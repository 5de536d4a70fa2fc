"""No orphans: the processes of a local Ray cluster whose driver died are ended at the next start.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

__all__ = ["STATE_ENV", "registry_dir", "register", "unregister", "cluster_processes",
           "reap_orphans", "wait_gone"]

#: environment variable naming mutune's state folder (default ``~/.cache/mutune``)
STATE_ENV = "MUTUNE_STATE_DIR"


def registry_dir() -> Path:
    """The folder of registered local clusters."""
    root = os.environ.get(STATE_ENV) or str(Path.home() / ".cache" / "mutune")
    return Path(root) / "ray-clusters"


def register(session_dir: str) -> Path | None:
    """Register this process as the driver of the local cluster at ``session_dir``; returns
    the entry's path (None when the state folder cannot be written: nothing is registered)."""
    import psutil

    me = psutil.Process()
    entry = registry_dir() / f"{me.pid}-{Path(session_dir).name}.json"
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_text(json.dumps({"driver_pid": me.pid, "driver_started": me.create_time(),
                                     "session_dir": str(session_dir)}))
    except OSError:
        return None
    return entry


def unregister(entry: Path | None) -> None:
    """Remove a registered cluster (its driver shut it down)."""
    if entry is not None:
        entry.unlink(missing_ok=True)


def _driver_alive(pid: int, started: float) -> bool:
    import psutil

    try:
        return abs(psutil.Process(pid).create_time() - started) < 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return False


def cluster_processes(session_dir: str) -> list[Any]:
    """The live processes (``psutil.Process``) holding a file under ``session_dir`` open or
    naming it on their command line; never this process."""
    import psutil

    session = str(Path(session_dir))
    root = session + os.sep
    out = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid == os.getpid():
            continue
        try:
            cmd = " ".join(proc.info.get("cmdline") or ())
            if session in cmd or any(f.path.startswith(root) for f in proc.open_files()):
                out.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


def reap_orphans(*, grace_s: float = 3.0) -> list[dict[str, Any]]:
    """End the processes of every registered local cluster whose driver is gone."""
    import psutil

    found = []
    folder = registry_dir()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            entry = json.loads(path.read_text())
            pid, started = int(entry["driver_pid"]), float(entry["driver_started"])
            session = str(entry["session_dir"])
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)          # unreadable: nothing to act on
            continue
        if _driver_alive(pid, started):
            continue
        procs = cluster_processes(session)
        ended = [{"pid": p.pid, "name": _name(p)} for p in procs]
        for p in procs:
            _signal(p, "terminate")
        _, alive = psutil.wait_procs(procs, timeout=grace_s)
        for p in alive:
            _signal(p, "kill")
        psutil.wait_procs(alive, timeout=grace_s)
        path.unlink(missing_ok=True)
        found.append({"driver_pid": pid, "session_dir": session, "ended": ended})
    return found


def _name(proc: Any) -> str:
    try:
        return proc.name() or "?"
    except Exception:  # noqa: BLE001 - gone or hidden: the PID says enough
        return "?"


def _signal(proc: Any, how: str) -> None:
    import psutil

    try:
        getattr(proc, how)()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        pass


def wait_gone(session_dir: str, timeout_s: float) -> bool:
    """Whether every process of ``session_dir`` is gone within ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not cluster_processes(session_dir):
            return True
        time.sleep(0.2)
    return not cluster_processes(session_dir)
