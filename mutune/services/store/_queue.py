"""The search server's rows: the sweep queue (a ``queued`` sweeps row, claimed by
compare-and-set), API tokens (sha256 hex digest only) and progress reads."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from mutune.errors import StoreError

from ._values import finite_json, iso as _iso, utc_now as _now
from ._models import ApiToken, ProxySweep, SchedulerEvent, Sweep, TargetRun, Trial, TrialReport

__all__ = ["QueueMixin", "SWEEP_STATUSES"]

#: Every status a sweep row can hold.
SWEEP_STATUSES = ("queued", "running", "completed", "failed", "cancelled")


def _summary(sw: Sweep) -> dict[str, Any]:
    return {"id": sw.id, "name": sw.name, "project": sw.project, "status": sw.status,
            "reason": sw.reason, "seed": sw.seed, "created_at": _iso(sw.created_at),
            "finished_at": _iso(sw.finished_at)}


class QueueMixin:
    """Queue, token and progress methods of :class:`~mutune.services.store.Store`."""

    def sweep_queued(self, config: Mapping[str, Any], *, project: str, seed: int,
                     name: str) -> int:
        """Record a submitted sweep (status ``queued``) owned by ``project``; returns its id."""

        def work(s: Session) -> int:
            row = Sweep(name=str(name), project=str(project), status="queued", seed=int(seed),
                        config=finite_json(config), created_at=_now())
            s.add(row)
            s.flush()
            return row.id
        return self._write(work)  # type: ignore[attr-defined]

    def claim_queued(self) -> int | None:
        """Take the oldest ``queued`` sweep (compare-and-set to ``running``) and return its id; None
        only when no queued sweep was seen (a lost round means another claimer progressed)."""
        def work(s: Session) -> tuple[int | None, bool]:
            ids = s.scalars(select(Sweep.id).where(Sweep.status == "queued")
                            .order_by(Sweep.id).limit(5)).all()
            for ident in ids:
                res = s.execute(update(Sweep).where(Sweep.id == ident, Sweep.status == "queued")
                                .values(status="running")
                                .execution_options(synchronize_session=False))
                if res.rowcount:
                    return ident, True
            return None, bool(ids)
        while True:
            got, saw_queued = self._write(work)  # type: ignore[attr-defined]
            if got is not None or not saw_queued:
                return got

    def requeue_running(self) -> list[int]:
        """Put every ``running`` sweep back to ``queued`` (at server start); their ids, oldest
        first."""
        def work(s: Session) -> list[int]:
            ids = s.scalars(select(Sweep.id).where(Sweep.status == "running")
                            .order_by(Sweep.id)).all()
            for ident in ids:
                s.execute(update(Sweep).where(Sweep.id == ident, Sweep.status == "running")
                          .values(status="queued", reason="re-queued: the server running it "
                                                          "stopped")
                          .execution_options(synchronize_session=False))
            return list(ids)
        return self._write(work)  # type: ignore[attr-defined]

    def cancel_queued(self, sweep_id: int) -> bool:
        """Cancel sweep ``sweep_id`` if still ``queued``; True if it was. StoreError if unknown."""
        def work(s: Session) -> bool:
            self._get(s, Sweep, sweep_id, "sweep")  # type: ignore[attr-defined]
            res = s.execute(update(Sweep).where(Sweep.id == sweep_id, Sweep.status == "queued")
                            .values(status="cancelled", reason="cancelled before it started",
                                    finished_at=_now())
                            .execution_options(synchronize_session=False))
            return bool(res.rowcount)
        return self._write(work)  # type: ignore[attr-defined]

    def mark_interrupted(self, sweep_id: int, reason: str) -> dict[str, int]:
        """Close what a dead run left ``running`` in sweep ``sweep_id`` (trials ``failed``,
        proxy sweeps
        and target runs ``interrupted``); how many rows of each changed."""
        def work(s: Session) -> dict[str, int]:
            now = _now()
            t = s.execute(update(Trial).where(Trial.sweep_id == sweep_id,
                                              Trial.status == "running")
                          .values(status="failed", reason=f"stale: {reason}", finished_at=now)
                          .execution_options(synchronize_session=False)).rowcount
            p = s.execute(update(ProxySweep).where(ProxySweep.sweep_id == sweep_id,
                                                   ProxySweep.status == "running")
                          .values(status="interrupted", finished_at=now)
                          .execution_options(synchronize_session=False)).rowcount
            g = s.execute(update(TargetRun).where(TargetRun.sweep_id == sweep_id,
                                                  TargetRun.status == "running")
                          .values(status="interrupted")
                          .execution_options(synchronize_session=False)).rowcount
            return {"trials": t, "proxy_sweeps": p, "target_runs": g}
        return self._write(work)  # type: ignore[attr-defined]

    def max_seq(self, sweep_id: int) -> int:
        """The largest report/decision sequence number recorded for the sweep (0 if none)."""
        def work(s: Session) -> int:
            trial_ids = select(Trial.id).where(Trial.sweep_id == sweep_id).scalar_subquery()
            a = s.scalar(select(func.max(TrialReport.seq))
                         .where(TrialReport.trial_id.in_(trial_ids))) or 0
            b = s.scalar(select(func.max(SchedulerEvent.seq))
                         .where(SchedulerEvent.trial_id.in_(trial_ids))) or 0
            return int(max(a, b))
        return self._read(work)  # type: ignore[attr-defined]

    def sweep_summary(self, sweep_id: int) -> dict[str, Any]:
        """The sweep row without its config (times UTC ISO 8601). StoreError for an unknown
        sweep."""
        return self._read(lambda s: _summary(  # type: ignore[attr-defined]
            self._get(s, Sweep, sweep_id, "sweep")))  # type: ignore[attr-defined]

    def sweeps_page(self, *, project: str | None, offset: int, limit: int
                    ) -> tuple[list[dict[str, Any]], int]:
        """One page of sweep summaries, newest first, and the total; ``project`` None: every
        project."""
        def work(s: Session) -> tuple[list[dict[str, Any]], int]:
            where = [] if project is None else [Sweep.project == project]
            total = int(s.scalar(select(func.count()).select_from(Sweep).where(*where)) or 0)
            rows = s.scalars(select(Sweep).where(*where).order_by(Sweep.id.desc())
                             .offset(int(offset)).limit(int(limit))).all()
            return [_summary(r) for r in rows], total
        return self._read(work)  # type: ignore[attr-defined]

    def sweep_progress(self, sweep_id: int) -> dict[str, Any]:
        """Status and progress of a sweep for the server's status endpoint: the summary plus
        ``progress``, ``best_so_far`` (lowest proxy ``val_loss``, nats) and ``target``.

        Raises:
            StoreError: unknown sweep."""
        def work(s: Session) -> dict[str, Any]:
            sw = self._get(s, Sweep, sweep_id, "sweep")  # type: ignore[attr-defined]
            cfg = sw.config or {}
            widths = list(cfg.get("widths") or [])
            samples = int((cfg.get("search") or {}).get("num_samples") or 0)
            proxies = s.scalars(select(ProxySweep).where(ProxySweep.sweep_id == sweep_id)
                                .order_by(ProxySweep.id)).all()
            trials = s.execute(select(Trial.id, Trial.proxy_sweep_id, Trial.kind, Trial.width,
                                      Trial.status, Trial.config)
                               .where(Trial.sweep_id == sweep_id)).all()
            per_width = []
            for p in proxies:
                mine = [t for t in trials if t.proxy_sweep_id == p.id]
                per_width.append({"width": p.width, "status": p.status, "trials": len(mine),
                                  "finished": sum(t.status != "running" for t in mine)})
            done_widths = {p.width for p in proxies if p.status == "completed"}
            live = [t for t in trials if not (t.kind == "proxy" and t.proxy_sweep_id in
                                              {p.id for p in proxies
                                               if p.status == "interrupted"})]
            finished = sum(t.status != "running" for t in live)
            expected = samples * len(widths) + 1 if widths else max(len(live), 1)
            best = None
            proxy_ids = {t.id: t for t in trials if t.kind == "proxy"}
            if proxy_ids:
                for r in s.scalars(select(TrialReport)
                                   .where(TrialReport.trial_id.in_(list(proxy_ids)))):
                    v = r.metrics.get("val_loss") if isinstance(r.metrics, dict) else None
                    if isinstance(v, (int, float)) and math.isfinite(v) and (
                            best is None or v < best["val_loss"]):
                        t = proxy_ids[r.trial_id]
                        best = {"trial_id": t.id, "width": t.width, "step": r.step,
                                "val_loss": float(v), "config": t.config}
            target = s.scalars(select(TargetRun).where(TargetRun.sweep_id == sweep_id)
                               .order_by(TargetRun.id.desc()).limit(1)).first()
            frac = 1.0 if sw.status == "completed" else min(finished / expected, 1.0)
            return {**_summary(sw),
                    "progress": {"widths": per_width, "widths_total": len(widths),
                                 "widths_completed": len(done_widths),
                                 "trials_total": expected, "trials_finished": finished,
                                 "trials_running": sum(t.status == "running" for t in live),
                                 "fraction": frac},
                    "best_so_far": best,
                    "target": None if target is None else {
                        "width": target.width, "status": target.status,
                        "val_loss": target.val_loss}}
        return self._read(work)  # type: ignore[attr-defined]

    def sweep_trials(self, sweep_id: int) -> list[dict[str, Any]]:
        """Every trial of the sweep without reports (seconds wall, losses nats)."""
        def work(s: Session) -> list[dict[str, Any]]:
            self._get(s, Sweep, sweep_id, "sweep")  # type: ignore[attr-defined]
            rows = s.scalars(select(Trial).where(Trial.sweep_id == sweep_id)
                             .order_by(Trial.id)).all()
            last: dict[int, Any] = {}
            if rows:
                for r in s.scalars(select(TrialReport)
                                   .where(TrialReport.trial_id.in_([t.id for t in rows]))
                                   .order_by(TrialReport.trial_id, TrialReport.step)):
                    last[r.trial_id] = (r.metrics or {}).get("val_loss")
            return [{"id": t.id, "kind": t.kind, "width": t.width, "config": t.config,
                     "seed": t.seed, "status": t.status, "reason": t.reason, "steps": t.steps,
                     "allocated_s": t.allocated_s, "productive_s": t.productive_s,
                     "last_val_loss": last.get(t.id)} for t in rows]
        return self._read(work)  # type: ignore[attr-defined]

    def token_added(self, project: str, token_sha256: str) -> int:
        """Store a new token's sha256 hex digest for ``project``; returns the token row id.

        Raises:
            StoreError: empty project, or a digest that is not 64 hex characters."""
        if not project or not str(project).strip():
            raise StoreError(f"project = {project!r}: a token needs a non-empty project name")
        digest = str(token_sha256)
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise StoreError("token_sha256 must be 64 lowercase hex characters (a sha256 "
                             "digest)")

        def work(s: Session) -> int:
            row = ApiToken(project=str(project).strip(), token_sha256=digest,
                           created_at=_now(), revoked=False)
            s.add(row)
            s.flush()
            return row.id
        return self._write(work)  # type: ignore[attr-defined]

    def token_project(self, token_sha256: str) -> str | None:
        """The project of the unrevoked token with this digest, or None."""
        return self._read(lambda s: s.scalar(  # type: ignore[attr-defined]
            select(ApiToken.project).where(ApiToken.token_sha256 == token_sha256,
                                           ApiToken.revoked.is_(False))))

    def token_revoked(self, token_id: int) -> bool:
        """Revoke token row ``token_id``; True if it was active. StoreError if unknown."""
        def work(s: Session) -> bool:
            row = self._get(s, ApiToken, token_id, "api token")  # type: ignore[attr-defined]
            was = not row.revoked
            row.revoked = True
            return was
        return self._write(work)  # type: ignore[attr-defined]

    def list_tokens(self) -> list[dict[str, Any]]:
        """Every token row without its digest: id, project, created_at, revoked."""
        return self._read(lambda s: [  # type: ignore[attr-defined]
            {"id": t.id, "project": t.project, "created_at": _iso(t.created_at),
             "revoked": t.revoked} for t in s.scalars(select(ApiToken).order_by(ApiToken.id))])
