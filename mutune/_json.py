"""JSON-safe data: non-finite floats become None, as JSON has no NaN (used by report files)."""
from __future__ import annotations

import math
from typing import Any

__all__ = ["json_safe"]


def json_safe(o: Any) -> Any:
    """``o`` with every non-finite float (NaN intervals of an unidentified fit, diverged runs)
    replaced by None, recursing into dicts, lists and tuples (tuples become lists)."""
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: json_safe(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [json_safe(v) for v in o]
    return o
