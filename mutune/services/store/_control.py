"""The store as a SweepControl: stop requests, heartbeats and the stale-trial query
(docs/architecture.md §7). Times are UTC; the lease is compared in Python so SQLite and
PostgreSQL behave alike."""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from mutune.errors import StoreError

from ._models import Sweep, Trial
from ._values import jsonable, utc_now

__all__ = ["ControlMixin"]


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    if value.tzinfo is None:  # SQLite hands back naive datetimes; they were stored as UTC
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


class ControlMixin:
    """Stop-request and heartbeat methods of :class:`~mutune.services.store.Store`."""

    def stop_requested(self, sweep_id: int) -> str | None:
        """``"cancelled by user at <UTC time>"`` once :meth:`request_cancel` was called, else
        None."""
        def work(s: Session) -> str | None:
            at = s.scalar(select(Sweep.cancel_requested_at).where(Sweep.id == sweep_id))
            return None if at is None else f"cancelled by user at {jsonable(at)}"
        return self._read(work)

    def request_cancel(self, sweep_id: int) -> str:
        """Ask the process running sweep ``sweep_id`` to stop; returns the sweep's status after
        the call.

        Raises:
            StoreError: unknown sweep, or the sweep already ended (names its status)."""
        def work(s: Session) -> str:
            row = self._get(s, Sweep, sweep_id, "sweep")
            if row.status != "running":
                raise StoreError(f"sweep {sweep_id} is {row.status}, not running: nothing "
                                 "to cancel")
            if row.cancel_requested_at is None:
                row.cancel_requested_at = utc_now()
            return row.status
        return self._write(work)


    def heartbeat(self, trial_id: int, *, now: datetime | None = None) -> None:
        """Record that trial ``trial_id`` is alive at ``now`` (default: now, UTC).

        Raises:
            StoreError: unknown trial."""
        stamp = _utc(now) or datetime.now(timezone.utc)

        def work(s: Session) -> None:
            trial = s.get(Trial, trial_id)
            if trial is None:
                raise StoreError(f"no trial with id {trial_id!r} in the results database")
            trial.heartbeat_at = stamp
        self._write(work)  # type: ignore[attr-defined]

    def stale_trials(self, sweep_id: int | None = None, *, lease_s: float,
                     now: datetime | None = None) -> list[dict[str, Any]]:
        """Running trials whose heartbeat (or start) is older than ``lease_s`` seconds before
        ``now``,
        oldest beat first.

        Raises:
            StoreError: ``lease_s`` not a positive finite number."""
        if not isinstance(lease_s, (int, float)) or not math.isfinite(lease_s) or lease_s <= 0:
            raise StoreError(f"lease_s = {lease_s!r}: must be a positive number of seconds")
        ref = _utc(now) or datetime.now(timezone.utc)
        horizon = ref - timedelta(seconds=float(lease_s))

        def work(s: Session) -> list[dict[str, Any]]:
            q = select(Trial).where(Trial.status == "running")
            if sweep_id is not None:
                q = q.where(Trial.sweep_id == sweep_id)
            out = []
            for t in s.scalars(q.order_by(Trial.id)):
                beat = _utc(t.heartbeat_at) or _utc(t.started_at)
                if beat is None or beat < horizon:
                    out.append({"id": t.id, "sweep_id": t.sweep_id,
                                "proxy_sweep_id": t.proxy_sweep_id, "key": t.key,
                                "kind": t.kind,
                                "started_at": _utc(t.started_at).isoformat()
                                if t.started_at else None,
                                "heartbeat_at": _utc(t.heartbeat_at).isoformat()
                                if t.heartbeat_at else None,
                                "age_s": None if beat is None
                                else (ref - beat).total_seconds()})
            out.sort(key=lambda r: -(r["age_s"] or math.inf))
            return out
        return self._read(work)  # type: ignore[attr-defined]

    def mark_stale(self, trial_id: int, reason: str) -> bool:
        """End running trial ``trial_id`` as ``failed`` (``"stale: <reason>"``); False if it
        had ended.

        Raises:
            StoreError: unknown trial."""
        text = f"stale: {reason}"

        def work(s: Session) -> bool:
            if s.get(Trial, trial_id) is None:
                raise StoreError(f"no trial with id {trial_id!r} in the results database")
            res = s.execute(update(Trial)
                            .where(Trial.id == trial_id, Trial.status == "running")
                            .values(status="failed", reason=text,
                                    finished_at=datetime.now(timezone.utc))
                            .execution_options(synchronize_session=False))
            return bool(res.rowcount)
        return self._write(work)  # type: ignore[attr-defined]
