"""The search server's settings (pydantic-settings), read from ``MUTUNE_*`` env vars."""
from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["ServerSettings"]


class ServerSettings(BaseSettings):
    """Settings of ``mutune serve``; each field also reads env ``MUTUNE_<NAME>``.

    ``data_roots``: folders a submitted ``data.path`` must lie under (empty: built-in datasets
    only; env: a JSON list). ``max_body_bytes``: 413 above. ``poll_s``, ``token_cache_s`` and
    ``status_cache_s`` are seconds."""
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
