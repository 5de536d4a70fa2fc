"""Engines and migrations of the results database (docs/architecture.md §7); nothing here builds
an engine at import time."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Engine, create_engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import NullPool

from mutune.errors import StoreError

__all__ = ["make_engine", "upgrade", "schema_lock", "normalize_url", "alembic_config",
           "MIGRATIONS_DIR"]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

#: SQLite waits this long (milliseconds) for a lock before ``database is locked``.
SQLITE_BUSY_TIMEOUT_MS = 30_000


def normalize_url(url: str | URL) -> URL:
    """Parse ``url``; ``postgresql://`` and ``postgres://`` become ``postgresql+psycopg://``.

    Raises:
        StoreError: ``url`` is not a database URL."""
    text = url.render_as_string(hide_password=False) if isinstance(url, URL) else str(url)
    if text.startswith("postgres://"):
        text = "postgresql://" + text[len("postgres://"):]
    try:
        parsed = make_url(text)
    except ArgumentError as exc:
        raise StoreError(f"not a database URL: {text!r} ({exc}); "
                         "expected e.g. sqlite:///mutune.db or postgresql://user@host/db") from exc
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def _sqlite_file(url: URL) -> Path | None:
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:") \
            or url.query.get("mode") == "memory":
        return None
    return Path(database)


def require_existing(url: str | URL) -> None:
    """Raise unless ``url`` names an existing database holding mutune's schema; creates nothing.

    Raises:
        StoreError: naming the database (password hidden) and what is missing."""
    parsed = normalize_url(url)
    shown = parsed.render_as_string(hide_password=True)
    if parsed.get_backend_name() == "sqlite":
        path = _sqlite_file(parsed)
        if path is not None and not path.exists():
            raise StoreError(f"no results database at {shown}: {path.resolve()} does not "
                             "exist (give --db URL or set MUTUNE_DB)")
        if path is None:
            return
    from sqlalchemy import inspect

    engine = create_engine(parsed)
    try:
        tables = set(inspect(engine).get_table_names())
    except Exception as exc:
        raise StoreError(f"cannot open the results database {shown}: {exc}") from exc
    finally:
        engine.dispose()
    if "sweeps" not in tables:
        raise StoreError(f"the database {shown} holds no mutune results (no sweeps table); "
                         "give --db URL or set MUTUNE_DB")


def _set_sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """WAL, busy timeout, foreign keys and ``synchronous=NORMAL`` on every SQLite connection (safe
    against killed processes, not power loss: SQLite documentation, "PRAGMA synchronous")."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def make_engine(url: str | URL, **kwargs: Any) -> Engine:
    """A SQLAlchemy engine for ``url`` (SQLite: the folder created, pragmas set; PostgreSQL:
    psycopg 3 with ``pool_pre_ping``); ``kwargs`` go to :func:`sqlalchemy.create_engine`.

    Raises:
        StoreError: ``url`` is not a database URL, or the SQLite folder cannot be created."""
    parsed = normalize_url(url)
    if parsed.get_backend_name() == "sqlite":
        path = _sqlite_file(parsed)
        if path is not None:
            try:
                path.expanduser().parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the folder of SQLite database {path}: "
                                 f"{exc}") from exc
        connect_args = dict(kwargs.pop("connect_args", {}))
        connect_args.setdefault("timeout", SQLITE_BUSY_TIMEOUT_MS / 1000)
        engine = create_engine(parsed, connect_args=connect_args, **kwargs)
        event.listen(engine, "connect", _set_sqlite_pragmas)
        return engine
    if parsed.get_backend_name() == "postgresql":
        kwargs.setdefault("pool_pre_ping", True)
    return create_engine(parsed, **kwargs)


def alembic_config(url: str | URL) -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    rendered = normalize_url(url).render_as_string(hide_password=False)
    # ConfigParser interpolates '%': escape it so encoded passwords survive.
    cfg.set_main_option("sqlalchemy.url", rendered.replace("%", "%%"))
    return cfg


#: The PostgreSQL advisory-lock key that serializes schema upgrades (the bytes "mutune").
SCHEMA_LOCK_KEY = int.from_bytes(b"mutune", "big")


@contextlib.contextmanager
def schema_lock(url: str | URL) -> Iterator[None]:
    """Hold the database's schema lock for the block: a PostgreSQL advisory lock, or an ``flock``
    on ``<database>.schema-lock`` for SQLite (POSIX only).

    Raises:
        StoreError: the lock could not be taken (the database is unreachable)."""
    parsed = normalize_url(url)
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        from sqlalchemy import text
        from sqlalchemy.exc import SQLAlchemyError

        engine = create_engine(parsed, poolclass=NullPool)
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": SCHEMA_LOCK_KEY})
                conn.commit()
                try:
                    yield
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:k)"),
                                 {"k": SCHEMA_LOCK_KEY})
                    conn.commit()
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot take the schema lock of "
                             f"{parsed.render_as_string(hide_password=True)}: {exc}") from exc
        finally:
            engine.dispose()
        return
    path = _sqlite_file(parsed) if backend == "sqlite" else None
    try:
        import fcntl
    except ImportError:          # not POSIX: SQLite's own locking is all there is
        fcntl = None  # type: ignore[assignment]
    if path is None or fcntl is None:
        yield
        return
    lock = path.expanduser().with_name(path.name + ".schema-lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fh = open(lock, "a+b")
    except OSError as exc:
        raise StoreError(f"cannot create the schema lock {lock}: {exc}") from exc
    with fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def upgrade(url: str | URL, revision: str = "head") -> None:
    """Migrate the database at ``url`` to ``revision`` (default: head), one process at a time.

    Raises:
        StoreError: the migration failed (the message carries the database's error)."""
    from alembic import command
    from sqlalchemy.exc import SQLAlchemyError

    cfg = alembic_config(url)
    with schema_lock(url):
        try:
            command.upgrade(cfg, revision)
        except SQLAlchemyError as exc:
            raise StoreError(f"migrating {normalize_url(url)!r} to {revision} failed: "
                             f"{exc}") from exc
