"""Reads of the store that the reports and the command line use: every row of a sweep,
summaries and costs across sweeps, counts, a trial's log. Nothing here writes."""
from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ._models import (Base, LedgerEntry, Provenance, ProxySweep, ScalingLaw, SchedulerEvent,
                      Sweep, SweepCheck, TargetRun, TransferRule, Trial, TrialLog, TrialReport)
from ._values import jsonable, row

__all__ = ["ReadsMixin"]


class ReadsMixin:
    """Read methods of :class:`~mutune.services.store.Store`."""

    def list_sweeps(self) -> list[dict[str, Any]]:
        """Every sweep row as plain data (config included), oldest first."""
        return self._read(lambda s: [row(r) for r in s.scalars(select(Sweep).order_by(Sweep.id))])

    def sweep_costs(self) -> dict[int, dict[str, float | None]]:
        """Sweep id → {name: value} of every sweep's sweep-scope ledger figures."""
        def work(s: Session) -> dict[int, dict[str, float | None]]:
            out: dict[int, dict[str, float | None]] = {}
            for e in s.scalars(select(LedgerEntry).where(LedgerEntry.scope == "sweep")
                               .order_by(LedgerEntry.id)):
                out.setdefault(e.sweep_id, {})[e.name] = e.value
            return out
        return self._read(work)

    def sweep_summaries(self, *, limit: int | None = None,
                        status: str | None = None) -> list[dict[str, Any]]:
        """One line per sweep for ``mutune list``, newest first; GPU-hours from the ledger, else the
        trials' allocated device-seconds / 3600."""
        def work(s: Session) -> list[dict[str, Any]]:
            q = select(Sweep).order_by(Sweep.id.desc())
            if status is not None:
                q = q.where(Sweep.status == status)
            if limit is not None:
                q = q.limit(limit)
            sweeps = s.scalars(q).all()
            ids = [w.id for w in sweeps]
            by_status: dict[int, dict[str, int]] = {i: {} for i in ids}
            device_s: dict[int, float] = {i: 0.0 for i in ids}
            total: dict[int, float] = {}
            if ids:
                for sid, st, n in s.execute(select(Trial.sweep_id, Trial.status, func.count())
                                            .where(Trial.sweep_id.in_(ids))
                                            .group_by(Trial.sweep_id, Trial.status)):
                    by_status[sid][st] = int(n)
                for sid, v in s.execute(
                        select(Trial.sweep_id,
                               func.sum(Trial.allocated_s * func.coalesce(Trial.devices, 1)))
                        .where(Trial.sweep_id.in_(ids)).group_by(Trial.sweep_id)):
                    device_s[sid] = float(v or 0.0)
                for sid, v in s.execute(select(LedgerEntry.sweep_id, LedgerEntry.value).where(
                        LedgerEntry.sweep_id.in_(ids), LedgerEntry.scope == "sweep",
                        LedgerEntry.name == "total_gpu_hours")):
                    if v is not None:
                        total[sid] = float(v)
            out = []
            for w in sweeps:
                cfg = w.config or {}
                out.append({"id": w.id, "name": w.name, "project": w.project,
                            "status": w.status, "reason": w.reason,
                            "created_at": jsonable(w.created_at),
                            "finished_at": jsonable(w.finished_at),
                            "family": (cfg.get("model") or {}).get("family"),
                            "widths": cfg.get("widths"),
                            "target_width": (cfg.get("target") or {}).get("width"),
                            "depths": cfg.get("depths"),
                            "target_depth": (cfg.get("target") or {}).get("depth"),
                            "trials": sum(by_status[w.id].values()),
                            "trials_by_status": by_status[w.id],
                            "gpu_hours": total.get(w.id, device_s[w.id] / 3600.0),
                            "cancel_requested": w.cancel_requested_at is not None})
            return out
        return self._read(work)

    def trial_log(self, trial_id: int) -> dict[str, Any]:
        """Trial ``trial_id``'s row with its ``stdout``, ``stderr`` and ``traceback``.

        Raises:
            StoreError: unknown trial."""
        def work(s: Session) -> dict[str, Any]:
            trial = self._get(s, Trial, trial_id, "trial")
            log = s.scalar(select(TrialLog).where(TrialLog.trial_id == trial_id))
            return {**row(trial), "stdout": log.stdout if log else "",
                    "stderr": log.stderr if log else "",
                    "traceback": log.traceback if log else None, "logged": log is not None}
        return self._read(work)

    def counts(self, sweep_id: int) -> dict[str, int]:
        """Rows per table that belong to sweep ``sweep_id``.

        Raises:
            StoreError: unknown sweep."""
        def work(s: Session) -> dict[str, int]:
            self._get(s, Sweep, sweep_id, "sweep")
            trial_ids = select(Trial.id).where(Trial.sweep_id == sweep_id).scalar_subquery()

            def count(model: type[Base], *where: Any) -> int:
                return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)
            return {
                "sweeps": 1,
                "provenance": count(Provenance, Provenance.sweep_id == sweep_id),
                "proxy_sweeps": count(ProxySweep, ProxySweep.sweep_id == sweep_id),
                "trials": count(Trial, Trial.sweep_id == sweep_id),
                "trial_reports": count(TrialReport, TrialReport.trial_id.in_(trial_ids)),
                "scheduler_events": count(SchedulerEvent, SchedulerEvent.trial_id.in_(trial_ids)),
                "transfer_rules": count(TransferRule, TransferRule.sweep_id == sweep_id),
                "target_runs": count(TargetRun, TargetRun.sweep_id == sweep_id),
                "ledger_entries": count(LedgerEntry, LedgerEntry.sweep_id == sweep_id),
                "scaling_laws": count(ScalingLaw, ScalingLaw.sweep_id == sweep_id),
                "sweep_checks": count(SweepCheck, SweepCheck.sweep_id == sweep_id),
                "trial_logs": count(TrialLog, TrialLog.trial_id.in_(trial_ids)),
            }
        return self._read(work)

    def sweep_rows(self, sweep_id: int) -> dict[str, Any]:
        """Everything recorded for sweep ``sweep_id`` as JSON-able data (times UTC ISO 8601).

        Raises:
            StoreError: unknown sweep."""
        def work(s: Session) -> dict[str, Any]:
            sweep = self._get(s, Sweep, sweep_id, "sweep")
            prov = s.scalar(select(Provenance).where(Provenance.sweep_id == sweep_id))
            proxies = s.scalars(select(ProxySweep).where(ProxySweep.sweep_id == sweep_id)
                                .order_by(ProxySweep.id)).all()
            trials = s.scalars(select(Trial).where(Trial.sweep_id == sweep_id)
                               .order_by(Trial.id)).all()
            trial_ids = [t.id for t in trials]
            reports: dict[int, list[dict[str, Any]]] = {t: [] for t in trial_ids}
            events: list[dict[str, Any]] = []
            if trial_ids:
                for r in s.scalars(select(TrialReport).where(TrialReport.trial_id.in_(trial_ids))
                                   .order_by(TrialReport.trial_id, TrialReport.step)):
                    reports[r.trial_id].append({"step": r.step, "seq": r.seq,
                                                "metrics": r.metrics})
                events = [row(e) for e in s.scalars(
                    select(SchedulerEvent).where(SchedulerEvent.trial_id.in_(trial_ids))
                    .order_by(SchedulerEvent.seq, SchedulerEvent.id))]
            rules = s.scalars(select(TransferRule).where(TransferRule.sweep_id == sweep_id)
                              .order_by(TransferRule.id)).all()
            target = s.scalars(select(TargetRun).where(TargetRun.sweep_id == sweep_id)
                               .order_by(TargetRun.id.desc()).limit(1)).first()
            ledger = s.scalars(select(LedgerEntry).where(LedgerEntry.sweep_id == sweep_id)
                               .order_by(LedgerEntry.id)).all()
            laws = s.scalars(select(ScalingLaw).where(ScalingLaw.sweep_id == sweep_id)
                             .order_by(ScalingLaw.id)).all()
            checks = s.scalars(select(SweepCheck).where(SweepCheck.sweep_id == sweep_id)
                               .order_by(SweepCheck.id)).all()
            return {
                "sweep": row(sweep),
                "provenance": dict(prov.data) if prov is not None else {},
                "proxy_sweeps": [row(p) for p in proxies],
                "trials": [{**row(t), "reports": reports[t.id]} for t in trials],
                "events": events,
                "rules": [row(r) for r in rules],
                "target": row(target) if target is not None else None,
                "ledger": [row(e) for e in ledger],
                "laws": [row(law) for law in laws],
                "checks": [row(c) for c in checks],
            }
        return self._read(work)
