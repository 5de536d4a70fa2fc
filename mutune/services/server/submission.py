"""A submitted sweep config: a YAML or JSON body (parsed as data only) → a validated
:class:`~mutune.config.SweepConfig` that keeps to the server's data roots and Ray cluster."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from mutune.config import SweepConfig, parse_config
from mutune.errors import ConfigError

__all__ = ["parse_submission", "check_data_path"]


def _fail(field: str, value: Any, rule: str) -> ConfigError:
    return ConfigError(f"invalid sweep config: {field} = {value!r}: {rule}",
                       [{"field": field, "value": repr(value), "rule": rule}])


def parse_submission(body: bytes, content_type: str | None,
                     data_roots: Sequence[Path], ray_address: str | None = None) -> SweepConfig:
    """Parse and validate a submitted config (``application/json`` strictly as JSON); ``data.path``
    is replaced by its resolved absolute path.

    Raises:
        ConfigError: not UTF-8, not YAML/JSON, not a mapping, a broken config rule, a data path
            outside the data roots, or a foreign ``ray.address`` (field, value, rule)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _fail("(body)", f"{len(body)} bytes", f"must be UTF-8 text ({err.reason})") from None
    kind = (content_type or "").split(";")[0].strip().lower()
    try:
        data = json.loads(text) if kind == "application/json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        what = "JSON" if kind == "application/json" else "YAML or JSON"
        raise _fail("(body)", text[:80], f"must be valid {what}: {err}".splitlines()[0]) \
            from None
    cfg = parse_config(data, source="(submitted)")
    if cfg.ray.address is not None and cfg.ray.address != ray_address:
        raise _fail("ray.address", cfg.ray.address,
                    "a submitted sweep runs on the server's Ray cluster "
                    f"({ray_address or 'a local one'}); leave ray.address out")
    path = getattr(cfg.data, "path", None)
    if path is not None:  # stored resolved, so the worker reads exactly what was checked
        resolved = check_data_path(path, data_roots)
        cfg = cfg.model_copy(update={"data": cfg.data.model_copy(update={"path":
                                                                         str(resolved)})})
    return cfg


def check_data_path(path: str, data_roots: Sequence[Path]) -> Path:
    """``path`` resolved (relative to the first root), if it lies inside one of ``data_roots``.

    Raises:
        ConfigError: field ``data.path``; no roots configured, or outside every root."""
    if not data_roots:
        raise _fail("data.path", path, "this server has no data roots: only built-in "
                                       "datasets (no data.path) are accepted")
    roots = [Path(r).resolve() for r in data_roots]
    p = Path(path)
    resolved = (p if p.is_absolute() else roots[0] / p).resolve()
    if not any(resolved == r or resolved.is_relative_to(r) for r in roots):
        raise _fail("data.path", path, "must lie under one of the server's data roots "
                                       f"({', '.join(str(r) for r in roots)})")
    return resolved
