"""Engines and migrations of the results database (docs/architecture.md §7).

:func:`make_engine` builds a SQLAlchemy engine for a database URL: SQLite files get WAL, a 30 s
busy timeout and enforced foreign keys on every connection; ``postgresql://`` URLs use the
psycopg 3 driver. :func:`upgrade` runs the Alembic migrations shipped in ``migrations/`` up to
head, one process at a time (:func:`schema_lock`). Nothing here builds an engine at import time.
"""
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

#: The Alembic script folder shipped inside the package.
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

#: SQLite waits this long (milliseconds) for a lock before ``database is locked``.
SQLITE_BUSY_TIMEOUT_MS = 30_000


def normalize_url(url: str | URL) -> URL:
    """Parse ``url`` and pick mutune's driver: ``postgresql://`` and ``postgres://`` become
    ``postgresql+psycopg://`` (psycopg 3); other URLs are returned parsed, unchanged.

    Raises:
        StoreError: ``url`` is not a database URL.
    """
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
    """The file behind a SQLite URL, or None for in-memory databases."""
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:") \
            or url.query.get("mode") == "memory":
        return None
    return Path(database)


def require_existing(url: str | URL) -> None:
    """Raise unless ``url`` names a database that exists and holds mutune's schema; creates
    nothing (not even a SQLite file or folder).

    Raises:
        StoreError: naming the database (password hidden) and what is missing.
    """
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
    except Exception as exc:   # unreachable server, bad credentials
        raise StoreError(f"cannot open the results database {shown}: {exc}") from exc
    finally:
        engine.dispose()
    if "sweeps" not in tables:
        raise StoreError(f"the database {shown} holds no mutune results (no sweeps table); "
                         "give --db URL or set MUTUNE_DB")


def _set_sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """On every new SQLite connection: WAL journal, busy timeout, foreign keys, and
    ``synchronous=NORMAL`` — a commit appends to the WAL without waiting for the disk (a
    running trial waits for its report's write; benchmarks/results/README.md has the
    figures). What was committed survives a killed process (the
    driver, a server, a worker); only an operating-system crash or a power loss can take
    the last commits back (SQLite documentation, "PRAGMA synchronous": "WAL mode is always
    consistent with synchronous=NORMAL, but WAL mode does lose durability")."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")     # WAL: durable across process kills
    finally:
        cursor.close()


def make_engine(url: str | URL, **kwargs: Any) -> Engine:
    """A SQLAlchemy engine for ``url``.

    SQLite (``sqlite:///path.db``, relative paths allowed): the parent folder is created, and every
    connection runs ``PRAGMA journal_mode=WAL``, ``busy_timeout=30000`` (ms),
    ``foreign_keys=ON`` and ``synchronous=NORMAL`` (:func:`_set_sqlite_pragmas`).
    PostgreSQL (``postgresql://user@host/db``): psycopg 3 driver with ``pool_pre_ping``.
    Extra ``kwargs`` go to :func:`sqlalchemy.create_engine`.

    Raises:
        StoreError: ``url`` is not a database URL, or the SQLite folder cannot be created.
    """
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
    """An :class:`alembic.config.Config` for ``url`` and the shipped migrations (no .ini file)."""
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
    """Hold the database's schema lock for the block: one process creates or upgrades the
    schema at a time; the others wait, then find it at head and do nothing.

    PostgreSQL: a session-level advisory lock (``pg_advisory_lock``, key
    :data:`SCHEMA_LOCK_KEY`) on a connection of its own, released at the end (or when the
    process dies: the server drops a dead session's locks). SQLite: an exclusive ``flock`` on
    ``<database>.schema-lock`` beside the file (released by the kernel when the process dies;
    POSIX only). An in-memory SQLite database needs no lock.

    Raises:
        StoreError: the lock could not be taken (the database is unreachable).
    """
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
    """Migrate the database at ``url`` to ``revision`` (default: head); an empty database gets
    every table, an up-to-date one is left as it is. Safe when several processes start on
    one fresh database at once: they take turns (:func:`schema_lock`).

    Raises:
        StoreError: the migration failed (the message carries the database's error).
    """
    from alembic import command
    from sqlalchemy.exc import SQLAlchemyError

    cfg = alembic_config(url)
    with schema_lock(url):
        try:
            command.upgrade(cfg, revision)
        except SQLAlchemyError as exc:
            raise StoreError(f"migrating {normalize_url(url)!r} to {revision} failed: "
                             f"{exc}") from exc
