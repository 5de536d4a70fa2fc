"""The search server's settings (pydantic-settings): one class, read from ``MUTUNE_*`` env vars.

``mutune serve`` builds it from its options; tests build it directly. Nothing here opens the
database.
"""
from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["ServerSettings"]


class ServerSettings(BaseSettings):
    """Settings of ``mutune serve``; each field also reads env ``MUTUNE_<NAME>``.

    Attributes:
        db: results database URL (env ``MUTUNE_DB``).
        data_roots: folders a submitted config's ``data.path`` must lie under (symlinks and
            ``..`` resolved); empty: only built-in datasets (no ``data.path``) are accepted.
            Env: a JSON list.
        out_dir: each sweep's Ray state and worker log go under ``out_dir/sweep-<id>``.
        ray_address: an existing Ray cluster for every sweep (overrides the configs'
            ``ray.address``); None: a local cluster per sweep, sized by the config.
        run_worker: run queued sweeps in this server (False: only queue them).
        max_body_bytes: largest request body accepted (413 above).
        poll_s: seconds between the worker's looks at an empty queue.
        token_cache_s: seconds a verified token's project is cached (a revoked token keeps
            working at most this long).
        status_cache_s: seconds a running sweep's status is cached (ended sweeps: until the
            server stops — their rows no longer change).
    """
    model_config = SettingsConfigDict(env_prefix="MUTUNE_", extra="ignore")

    db: str = "sqlite:///mutune.db"
    data_roots: list[Path] = Field(default_factory=list)
    out_dir: Path = Path("mutune-server")
    ray_address: str | None = None
    run_worker: bool = True
    max_body_bytes: int = Field(default=1_048_576, ge=1024)
    poll_s: float = Field(default=1.0, gt=0)
    token_cache_s: float = Field(default=5.0, ge=0)
    status_cache_s: float = Field(default=0.5, ge=0)
