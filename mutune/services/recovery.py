"""The one recovery path of an interrupted sweep, shared by ``mutune resume`` and the server
(docs/architecture.md §4)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mutune.errors import MutuneError

__all__ = ["reap_stale", "resume_sweep"]


def reap_stale(store: Any, sweep_id: int, *, lease_s: float, now: Any = None) -> list[str]:
    """End a sweep's running trials whose heartbeat is older than ``lease_s`` (``failed``, reason
    ``stale: …``); one line per reaped trial.

    Raises:
        MutuneError: a running trial beat within its lease (a live trial is never reaped)."""
    stale = store.stale_trials(sweep_id, lease_s=lease_s, now=now)
    stale_ids = {t["id"] for t in stale}
    live = [t for t in store.sweep_rows(sweep_id)["trials"]
            if t["status"] == "running" and t["id"] not in stale_ids]
    if live:
        raise MutuneError(f"sweep {sweep_id}: trial(s) {[t['key'] for t in live][:5]} beat "
                          f"within their lease ({lease_s:g} s): is the sweep still running? "
                          "Resume after the lease has passed.")
    out = []
    for t in stale:
        age = t["age_s"]
        reason = (f"heartbeat {age:.1f} s old > lease {lease_s:g} s (driver gone); "
                  "retried from its checkpoint on resume")
        if store.mark_stale(t["id"], reason):
            out.append(f"trial {t['key']}: {reason}")
    return out


def resume_sweep(store: Any, sweep_id: int, *, out_dir: Path, interrupted: float | str,
                 recorder: Any = None, on_stale: Callable[[str], None] | None = None,
                 on_progress: Any = None, ray_address: str | None = None) -> Any:
    """Finish interrupted sweep ``sweep_id`` with :func:`mutune.pipeline.resume.resume_pipeline`.

    ``interrupted``: a lease in seconds (reap trials whose last beat is older), or why the driver
    is known to be dead (every ``running`` row is closed at once).

    Raises:
        MutuneError: live trials (within the lease), a completed sweep, or a stage failed."""
    from mutune.pipeline.resume import resume_pipeline

    if isinstance(interrupted, str):
        store.mark_interrupted(sweep_id, interrupted)
    else:
        for line in reap_stale(store, sweep_id, lease_s=float(interrupted)):
            if on_stale is not None:
                on_stale(line)
    return resume_pipeline(recorder or store, store.sweep_rows(sweep_id), out_dir=out_dir,
                           on_progress=on_progress, control=store, ray_address=ray_address)
