"""Shared fixtures: an empty database per test on SQLite and PostgreSQL, and a local Ray.

PostgreSQL: the server at ``MUTUNE_TEST_POSTGRES`` (default
``postgresql://postgres@127.0.0.1:5432/test``) must accept CREATE DATABASE; each test gets a
fresh ``mutune_test_<hex>`` database, dropped afterwards. When the server is unreachable the
PostgreSQL cases are skipped, unless ``MUTUNE_REQUIRE_POSTGRES=1`` makes that a failure.
"""
from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from mutune.errors import ConfigError

#: the MLP-on-digits example config: the small, fast model most tests shrink further
MLP_DIGITS = Path(__file__).resolve().parents[1] / "configs" / "mlp-digits.yaml"

POSTGRES_ADMIN_URL = os.environ.get("MUTUNE_TEST_POSTGRES",
                                    "postgresql://postgres@127.0.0.1:5432/test")


def _postgres_admin():
    """An autocommit psycopg connection to the admin database, or skip/fail if unreachable."""
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - psycopg is a dependency
        reason = f"psycopg is not installed: {exc}"
    else:
        try:
            return psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=3)
        except psycopg.Error as exc:
            reason = f"PostgreSQL at {POSTGRES_ADMIN_URL} unreachable: {exc}"
    if os.environ.get("MUTUNE_REQUIRE_POSTGRES") == "1":
        pytest.fail(reason + " (MUTUNE_REQUIRE_POSTGRES=1)")
    pytest.skip(reason)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """URL of a fresh, empty PostgreSQL database, dropped after the test."""
    from sqlalchemy.engine import make_url

    admin = _postgres_admin()
    name = f"mutune_test_{secrets.token_hex(6)}"
    try:
        admin.execute(f'CREATE DATABASE "{name}"')
        url = make_url(POSTGRES_ADMIN_URL).set(database=name)
        yield url.render_as_string(hide_password=False)
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(params=["sqlite",
                        pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """URL of an empty database: a SQLite file under ``tmp_path`` or a fresh PostgreSQL db."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'db' / 'mutune.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def one_store_url(tmp_path) -> Iterator[str]:
    """One database for an end-to-end test too slow to run on both (a minute each): a fresh
    PostgreSQL database when the server answers or is required (CI), else a SQLite file;
    the database layer itself is tested on both (``store_url``)."""
    try:
        import psycopg

        psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True, connect_timeout=3).close()
        reachable = True
    except Exception:  # noqa: BLE001 - any failure to connect means: not here
        reachable = False
    if not reachable and os.environ.get("MUTUNE_REQUIRE_POSTGRES") != "1":
        yield f"sqlite:///{tmp_path / 'db' / 'mutune.db'}"
        return
    from sqlalchemy.engine import make_url

    admin = _postgres_admin()
    name = f"mutune_test_{secrets.token_hex(6)}"
    try:
        admin.execute(f'CREATE DATABASE "{name}"')
        yield make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(
            hide_password=False)
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(scope="session")
def ray_local() -> Iterator[None]:
    """A real local Ray cluster for the whole session, started as a sweep starts its own
    (``cluster.ray_cluster``: 2 CPUs, no dashboard, the workers' environment, trial actors in
    the idle workers, registered against orphans)."""
    from mutune.config import RayConfig
    from mutune.search.backends.ray_tune.cluster import ray_cluster

    with ray_cluster(RayConfig(num_cpus=2)):
        yield


def make_tiny_config():
    """The MLP example config (configs/mlp-digits.yaml) shrunk to seconds: widths 16/32, 4
    samples, max_t 27, target 64; each width's confirmation design (9 points) with one seed per
    point, no gate round, and the target as one Ray Tune trial."""
    from mutune.config import load_config, parse_config

    d = load_config(MLP_DIGITS).model_dump(mode="json")
    d["widths"] = [16, 32]
    d["model"]["base_width"] = 16
    d["target"]["width"] = 64
    d["search"]["num_samples"] = 4
    d["search"]["scheduler"].update(grace_period=3, reduction_factor=3, max_t=27)
    d["train"]["eval_every"] = 3
    d["transfer"]["confirm_replicates"] = 1
    d["transfer"]["confirm_center_replicates"] = 1   # test_pipeline/test_gate replicate it
    d["transfer"]["gate_rounds"] = 0      # tests/pipeline/test_gate.py, test_pipeline.py run it
    # one Ray Tune trial (the CPU default, set here so no test depends on it): a Ray Train
    # worker group costs ~40 s per pipeline here;
    # tests/search/backends/test_ray_train_target.py and the target-resume test run it with 2
    d["target"]["num_workers"] = 1
    return parse_config(d)


@pytest.fixture
def tiny_config():
    """:func:`make_tiny_config` as a fixture."""
    return make_tiny_config()


@contextmanager
def config_error(field: str, value: str | None = None,
                 rule: str | None = None) -> Iterator[pytest.ExceptionInfo[ConfigError]]:
    """Expect a :class:`ConfigError` whose data names ``field`` (dotted path) with ``value``
    (the repr it records) and a rule containing ``rule`` (a key phrase, not the sentence)."""
    with pytest.raises(ConfigError) as info:
        yield info
    errs = info.value.errors
    hits = [e for e in errs if e["field"] == field]
    assert hits, f"no error on {field!r}: {errs or str(info.value)}"
    assert value is None or any(e["value"] == value for e in hits), hits
    assert rule is None or any(rule in e["rule"] for e in hits), hits
