"""The results store: a Recorder and SweepControl writing to the results database, each write a
short transaction durable on return (docs/architecture.md §7); NaN/inf never reach JSON."""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import delete, func, insert, select
from sqlalchemy.engine import URL, Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session

from mutune.errors import StoreError
from mutune.search.recording import TRIAL_STATUSES

from . import _engine
from ._control import ControlMixin
from ._fits import FitsMixin
from ._values import finite_float, finite_json, optional_int, utc_now
from ._queue import QueueMixin
from ._reads import ReadsMixin
from ._models import (Base, LedgerEntry, Provenance, ProxySweep, SchedulerEvent,
                      Sweep, TargetRun, Trial, TrialLog, TrialReport)

__all__ = ["Store", "finite_json", "DEFAULT_PROJECT"]

_T = TypeVar("_T")

#: Attempts of one write when SQLite says ``database is locked``; waits 0.05 s, 0.1 s, … between.
WRITE_ATTEMPTS = 5
_BACKOFF_S = 0.05

TRIAL_KINDS = ("proxy", "confirm", "target")
#: the project of a sweep whose config names none (``cost.project``), e.g. one run from the
#: command line: a token of this project (``mutune token create``'s default) sees it
DEFAULT_PROJECT = "default"
_TIMING_FLOATS = ("allocated_s", "productive_s", "eval_s", "overhead_s", "devices",
                  "recovery_s", "checkpoint_s", "upload_s")
_TIMING_INTS = ("steps", "samples", "restarts", "repeated_steps", "preemptions")


class Store(ControlMixin, FitsMixin, QueueMixin, ReadsMixin):
    """The results database as a Recorder and SweepControl (docs/architecture.md §2, §7).

    Open it with :meth:`open` or from an engine; methods raise :class:`StoreError` for unknown
    ids, invalid statuses/kinds, and refused writes."""

    def __init__(self, engine: Engine) -> None:
        """Wrap ``engine`` (see :func:`make_engine`); the schema must be at head already."""
        self.engine = engine

    @classmethod
    def open(cls, url: str | URL, *, upgrade: bool = True, create: bool = True) -> Store:
        """Open the database at ``url``, migrating to head first when ``upgrade``.

        Raises:
            StoreError: bad URL, failed migration, or (``create`` False) no such database."""
        if not create:
            _engine.require_existing(url)
        if upgrade:
            _engine.upgrade(url)
        return cls(_engine.make_engine(url))

    def close(self) -> None:
        """Release every pooled connection; the store must not be used afterwards."""
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.engine.url!r})"

    def _write(self, work: Callable[[Session], _T]) -> _T:
        """Run ``work`` in one transaction, retrying on ``database is locked``."""
        for attempt in range(WRITE_ATTEMPTS):
            try:
                with Session(self.engine, expire_on_commit=False) as session, session.begin():
                    return work(session)
            except OperationalError as exc:
                if "database is locked" in str(exc) and attempt + 1 < WRITE_ATTEMPTS:
                    time.sleep(_BACKOFF_S * 2 ** attempt)
                    continue
                raise StoreError(f"the results database refused a write: {exc}") from exc
            except SQLAlchemyError as exc:
                raise StoreError(f"the results database refused a write: {exc}") from exc
        raise StoreError("unreachable")  # pragma: no cover

    def _read(self, work: Callable[[Session], _T]) -> _T:
        try:
            with Session(self.engine) as session:
                return work(session)
        except SQLAlchemyError as exc:
            raise StoreError(f"reading the results database failed: {exc}") from exc

    def _get(self, session: Session, model: type[_T], ident: int, what: str) -> _T:
        row = session.get(model, ident)
        if row is None:
            raise StoreError(f"no {what} with id {ident!r} in the results database "
                             f"{self.url}")
        return row

    @property
    def url(self) -> str:
        """The database URL, password hidden."""
        return self.engine.url.render_as_string(hide_password=True)

    def _insert_ignore(self, session: Session, model: type[Base], values: dict[str, Any],
                       keys: list[str]) -> None:
        """INSERT … ON CONFLICT (keys) DO NOTHING on SQLite and PostgreSQL."""
        dialect = session.get_bind().dialect.name
        if dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        elif dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            exists = session.scalar(select(func.count()).select_from(model).where(
                *(getattr(model, k) == values[k] for k in keys)))
            if not exists:
                session.add(model(**values))
            return
        session.execute(insert(model).values(**values).on_conflict_do_nothing(
            index_elements=keys))

    def sweep_started(self, config: Mapping[str, Any], seed: int,
                      provenance: Mapping[str, Any], *, sweep_id: int | None = None) -> int:
        """Record a new sweep (status ``running``) and its provenance row; returns its id. With
        ``sweep_id`` (a ``queued`` row of the server) the run attaches to that row instead.

        Raises:
            StoreError: ``sweep_id`` unknown, or that sweep already ended."""
        def work(s: Session) -> int:
            named = config.get("project") or (config.get("cost") or {}).get("project")
            project = named or DEFAULT_PROJECT
            if sweep_id is not None:
                sweep = self._get(s, Sweep, sweep_id, "sweep")
                if sweep.status not in ("queued", "running"):
                    raise StoreError(f"sweep {sweep_id} is {sweep.status!r}; only a queued or "
                                     "running sweep can be started")
                sweep.status, sweep.seed = "running", int(seed)
                sweep.config = finite_json(config)
                if sweep.project is None:
                    sweep.project = str(project)
                prov = s.scalar(select(Provenance).where(Provenance.sweep_id == sweep_id))
                if prov is None:
                    s.add(Provenance(sweep_id=sweep_id, data=finite_json(provenance)))
                else:
                    prov.data = finite_json(provenance)
                return sweep.id
            sweep = Sweep(name=str(config.get("name") or "sweep"), project=str(project),
                          status="running", seed=int(seed), config=finite_json(config),
                          created_at=utc_now())
            s.add(sweep)
            s.flush()
            s.add(Provenance(sweep_id=sweep.id, data=finite_json(provenance)))
            return sweep.id
        return self._write(work)

    def proxy_sweep_started(self, sweep_id: int, width: int,
                            settings: Mapping[str, Any]) -> int:
        """Record the sweep at proxy ``width`` (status ``running``); returns its id."""
        def work(s: Session) -> int:
            self._get(s, Sweep, sweep_id, "sweep")
            row = ProxySweep(sweep_id=sweep_id, width=int(width), settings=finite_json(settings),
                             status="running", started_at=utc_now())
            s.add(row)
            s.flush()
            return row.id
        return self._write(work)

    def trial_started(self, sweep_id: int, proxy_sweep_id: int | None, kind: str, key: str,
                      width: int, config: Mapping[str, Any], seed: int) -> int:
        """Record a trial granted its resources (``running``, heartbeat now); returns its id."""
        if kind not in TRIAL_KINDS:
            raise StoreError(f"trial kind must be one of {TRIAL_KINDS}, got {kind!r}")

        def work(s: Session) -> int:
            self._get(s, Sweep, sweep_id, "sweep")
            if proxy_sweep_id is not None:
                proxy = self._get(s, ProxySweep, proxy_sweep_id, "proxy sweep")
                if proxy.sweep_id != sweep_id:
                    raise StoreError(f"proxy sweep {proxy_sweep_id} belongs to sweep "
                                     f"{proxy.sweep_id}, not {sweep_id}")
            now = utc_now()
            row = Trial(sweep_id=sweep_id, proxy_sweep_id=proxy_sweep_id, kind=kind, key=str(key),
                        width=int(width), config=finite_json(config), seed=int(seed),
                        status="running", started_at=now, heartbeat_at=now)
            s.add(row)
            s.flush()
            return row.id
        return self._write(work)

    def trial_reported(self, trial_id: int, step: int, metrics: Mapping[str, float],
                       seq: int) -> None:
        """Record a report at ``step`` (a repeat is ignored) and refresh the heartbeat."""
        def work(s: Session) -> None:
            trial = self._get(s, Trial, trial_id, "trial")
            now = utc_now()
            self._insert_ignore(s, TrialReport,
                                {"trial_id": trial_id, "step": int(step), "seq": int(seq),
                                 "metrics": finite_json(metrics), "created_at": now},
                                ["trial_id", "step"])
            trial.heartbeat_at = now
        self._write(work)

    def scheduler_decided(self, trial_id: int, milestone: int, value: float | None,
                          cutoff: float | None, decision: str, seq: int) -> None:
        """Record the decision at rung ``milestone`` (a repeat is ignored; non-finite values
        NULL)."""
        def work(s: Session) -> None:
            trial = self._get(s, Trial, trial_id, "trial")
            now = utc_now()
            self._insert_ignore(s, SchedulerEvent,
                                {"trial_id": trial_id, "milestone": int(milestone),
                                 "seq": int(seq), "value": finite_float(value, "value"),
                                 "cutoff": finite_float(cutoff, "cutoff"),
                                 "decision": str(decision), "created_at": now},
                                ["trial_id", "milestone", "decision"])
            trial.heartbeat_at = now
        self._write(work)

    def trial_finished(self, trial_id: int, status: str, reason: str | None,
                       timing: Mapping[str, float]) -> None:
        """Record the trial's terminal ``status``, reason and timing (wall seconds; missing
        keys NULL).

        Raises:
            StoreError: unknown trial, or ``status`` not a terminal TRIAL_STATUSES entry."""
        terminal = tuple(x for x in TRIAL_STATUSES if x != "running")
        if status not in terminal:
            raise StoreError(f"trial status must be one of {terminal}, got {status!r}")

        def work(s: Session) -> None:
            trial = self._get(s, Trial, trial_id, "trial")
            trial.status = status
            trial.reason = reason
            trial.finished_at = utc_now()
            for name in _TIMING_FLOATS:
                setattr(trial, name, finite_float(timing.get(name), f"timing[{name!r}]"))
            for name in _TIMING_INTS:
                setattr(trial, name, optional_int(timing.get(name), f"timing[{name!r}]"))
            kind = timing.get("device_kind")
            trial.device_kind = None if kind is None else str(kind)
        self._write(work)

    def trial_logged(self, trial_id: int, stdout: str, stderr: str,
                     traceback: str | None) -> None:
        """Record what trial ``trial_id`` wrote; a repeat replaces the row."""
        def work(s: Session) -> None:
            self._get(s, Trial, trial_id, "trial")
            row = s.scalar(select(TrialLog).where(TrialLog.trial_id == trial_id))
            if row is None:
                row = TrialLog(trial_id=trial_id)
                s.add(row)
            row.stdout, row.stderr = str(stdout), str(stderr)
            row.traceback = None if traceback is None else str(traceback)
        self._write(work)

    def scheduler_saved(self, proxy_sweep_id: int, state: Mapping[str, Any],
                        searcher_state: Mapping[str, Any] | None, seq: int) -> None:
        """Save the scheduler's and searcher's state as of ``seq``; an older ``seq`` is ignored."""
        def work(s: Session) -> None:
            row = self._get(s, ProxySweep, proxy_sweep_id, "proxy sweep")
            if row.state_seq is not None and row.state_seq > int(seq):
                return
            row.scheduler_state = finite_json(state)
            row.searcher_state = None if searcher_state is None else finite_json(searcher_state)
            row.state_seq = int(seq)
        self._write(work)

    def trial_checkpoint_dir(self, trial_id: int, path: str) -> None:
        def work(s: Session) -> None:
            self._get(s, Trial, trial_id, "trial").checkpoint_dir = str(path)
        self._write(work)

    def trial_resumed(self, trial_id: int, reason: str) -> None:
        """A trial continues from its checkpoint: ``running`` again, ``reason`` why it had
        stopped."""
        def work(s: Session) -> None:
            t = self._get(s, Trial, trial_id, "trial")
            t.status, t.reason, t.finished_at, t.heartbeat_at = "running", reason, None, utc_now()
        self._write(work)

    def proxy_sweep_finished(self, proxy_sweep_id: int, best: Mapping[str, Any]) -> None:
        """Record the width's best trial (``best``) and mark the proxy sweep ``completed``."""
        def work(s: Session) -> None:
            row = self._get(s, ProxySweep, proxy_sweep_id, "proxy sweep")
            row.best = finite_json(best)
            row.status = "completed"
            row.finished_at = utc_now()
        self._write(work)

    def target_started(self, sweep_id: int, trial_id: int, width: int,
                       config: Mapping[str, Any]) -> int:
        """Record the target run of trial ``trial_id`` (status ``running``); returns its id.

        Raises:
            StoreError: unknown sweep or trial, or the trial belongs to another sweep."""
        def work(s: Session) -> int:
            self._get(s, Sweep, sweep_id, "sweep")
            trial = self._get(s, Trial, trial_id, "trial")
            if trial.sweep_id != sweep_id:
                raise StoreError(f"trial {trial_id} belongs to sweep {trial.sweep_id}, "
                                 f"not {sweep_id}")
            row = TargetRun(sweep_id=sweep_id, trial_id=trial_id, width=int(width),
                            config=finite_json(config), status="running")
            s.add(row)
            s.flush()
            return row.id
        return self._write(work)

    def target_finished(self, target_id: int, val_loss: float | None, status: str,
                        model_dir: str | None = None) -> None:
        """Record the target's final validation loss (nats; NULL if not finite) and its model
        folder."""
        def work(s: Session) -> None:
            row = self._get(s, TargetRun, target_id, "target run")
            row.val_loss = finite_float(val_loss, "val_loss")
            row.status = str(status)
            row.model_dir = None if model_dir is None else str(model_dir)
        self._write(work)

    def ledger_recorded(self, sweep_id: int, entries: Sequence[Mapping[str, Any]]) -> None:
        """Record the sweep's cost figures in one transaction, replacing any recorded before.

        Raises:
            StoreError: unknown sweep or trial, or an entry misses a required key."""
        for index, entry in enumerate(entries):
            missing = [k for k in ("scope", "name", "value", "unit") if k not in entry]
            if missing:
                raise StoreError(f"ledger entry {index} ({entry.get('name')!r}) misses "
                                 f"{missing}")

        rows = [{"sweep_id": sweep_id, "trial_id": entry.get("trial_id"),
                 "scope": str(entry["scope"]), "name": str(entry["name"]),
                 "value": finite_float(entry["value"], f"ledger {entry['name']}"),
                 "unit": str(entry["unit"]),
                 "formula": None if entry.get("formula") is None else str(entry["formula"]),
                 "inputs": (None if entry.get("inputs") is None
                            else finite_json(entry["inputs"]))} for entry in entries]
        wanted = {r["trial_id"] for r in rows if r["trial_id"] is not None}

        def work(s: Session) -> None:
            self._get(s, Sweep, sweep_id, "sweep")
            known = set(s.scalars(select(Trial.id).where(Trial.id.in_(wanted)))) if wanted \
                else set()
            missing = sorted(wanted - known, key=repr)
            if missing:
                raise StoreError(f"no trial with id {missing[0]!r} in the results database "
                                 f"{self.url}")
            s.execute(delete(LedgerEntry).where(LedgerEntry.sweep_id == sweep_id))
            if rows:
                s.execute(insert(LedgerEntry), rows)
        self._write(work)

    def sweep_finished(self, sweep_id: int, status: str, reason: str | None = None) -> None:
        """Record the sweep's end: ``status`` (``completed``, ``failed``, …), reason, time."""
        def work(s: Session) -> None:
            row = self._get(s, Sweep, sweep_id, "sweep")
            row.status = str(status)
            row.reason = reason
            row.finished_at = utc_now()
        self._write(work)

    def sweep_resumed(self, sweep_id: int) -> None:
        """An interrupted sweep continues: status ``running``, no finish time, no reason."""
        def work(s: Session) -> None:
            row = self._get(s, Sweep, sweep_id, "sweep")
            row.status, row.reason, row.finished_at = "running", None, None
        self._write(work)
