"""The one recovery path of an interrupted sweep, shared by ``mutune resume`` and the server.

:func:`resume_sweep` first ends what the dead driver left ``running`` — after its heartbeat
lease (``mutune resume``: :func:`reap_stale` refuses while a trial still beats), or at once
when the caller knows the driver is gone (a restarted server: its predecessor, the only one on
this database, died) — then continues the sweep with
:func:`mutune.pipeline.resume.resume_pipeline`: completed widths are rebuilt, the interrupted
width resumes from its trials' checkpoints, and the later stages finish
(docs/architecture.md §4).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mutune.errors import MutuneError

__all__ = ["reap_stale", "resume_sweep"]


def reap_stale(store: Any, sweep_id: int, *, lease_s: float, now: Any = None) -> list[str]:
    """End a sweep's running trials whose heartbeat is older than ``lease_s`` (marked
    ``failed`` with reason ``stale: …``), so a resume retries them from their checkpoints.

    Returns:
        One line per reaped trial (its key, the age of its last beat and the lease).
    Raises:
        MutuneError: a running trial beat within its lease — its driver may still be alive,
            and a live trial is never reaped.
    """
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
    """Finish interrupted sweep ``sweep_id`` (see the module docstring).

    Args:
        store: the results :class:`~mutune.services.store.Store`.
        out_dir: folder for the resumed run's Ray state and plots.
        recorder: where new rows go (default ``store``; the server passes its recorder that
            also watches for a cancel).
        interrupted: a lease in seconds (a number): reap trials whose last beat is older
            (``mutune resume``); or why the driver is known to be dead (a string): every
            ``running`` row is closed at once (trials ``failed`` with reason ``stale: …``, to
            be continued).
        on_stale: called with one line per reaped trial.
        ray_address: run on this Ray cluster instead of the config's (the server's own).
    Returns:
        The :class:`~mutune.pipeline.sweep.PipelineResult`.
    Raises:
        MutuneError: live trials (within the lease), a completed sweep, or a stage failed.
    """
    from mutune.pipeline.resume import resume_pipeline

    if isinstance(interrupted, str):
        store.mark_interrupted(sweep_id, interrupted)
    else:
        for line in reap_stale(store, sweep_id, lease_s=float(interrupted)):
            if on_stale is not None:
                on_stale(line)
    return resume_pipeline(recorder or store, store.sweep_rows(sweep_id), out_dir=out_dir,
                           on_progress=on_progress, control=store, ray_address=ray_address)
