"""Plain values in and out of the database: JSON without NaN/inf, finite floats, UTC times."""
from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from mutune.errors import StoreError

from ._models import Base

__all__ = ["finite_json", "finite_float", "optional_int", "utc_now", "iso", "jsonable", "row"]


def finite_json(value: Any) -> Any:
    """``value`` as JSON-able data, non-finite floats as ``"nan"``, ``"inf"`` or ``"-inf"``."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, Mapping):
        return {str(k): finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", 0) == 0:
        try:
            return finite_json(item())
        except (TypeError, ValueError):
            return value
    return value


def finite_float(value: Any, what: str) -> float | None:
    """``value`` as a float for a float column, None when missing or not finite."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} must be a number, got {value!r}") from exc
    return number if math.isfinite(number) else None


def optional_int(value: Any, what: str) -> int | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise StoreError(f"{what} must be an integer, got {value!r}") from exc
    return int(number) if math.isfinite(number) else None


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def jsonable(value: Any) -> Any:
    """A column value as plain JSON-able data (datetimes as UTC ISO 8601 strings)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:  # SQLite hands back naive datetimes; they were stored as UTC
            value = value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc).isoformat()
    return value


def row(obj: Base, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every column of ``obj`` as plain data."""
    return {c.key: jsonable(getattr(obj, c.key))
            for c in obj.__table__.columns if c.key not in exclude}


def iso(value: datetime | None) -> str | None:
    """A stored time as UTC ISO 8601 (SQLite hands back naive datetimes stored as UTC)."""
    return None if value is None else jsonable(value)
