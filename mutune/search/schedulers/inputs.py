"""What an executor may report to a scheduler core, checked before anything is decided."""
from __future__ import annotations

import math
import numbers
from typing import Any

from mutune.errors import SearchError

__all__ = ["check_step", "check_value", "check_trial"]


def _shown(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def check_trial(trial: Any) -> str:
    """``trial`` if it is a non-empty string (the driver's key); else SearchError."""
    if not isinstance(trial, str) or not trial:
        raise SearchError(f"trial = {_shown(trial)}: a trial key must be a non-empty string")
    return trial


def check_step(trial: str, step: Any, field: str = "step") -> int:
    """The training step as an int ≥ 1 (a float only when it holds one exactly).

    Raises:
        SearchError: naming ``trial``, ``field`` and the value."""
    if type(step) is int and step >= 1:      # the common case, checked without the ABCs
        return step
    if isinstance(step, bool) or not isinstance(step, numbers.Real):
        raise SearchError(f"trial {trial!r}: {field} = {_shown(step)}: must be an integer "
                          "number of training steps")
    if isinstance(step, numbers.Integral):
        out = int(step)
    else:
        f = float(step)
        if not (math.isfinite(f) and f.is_integer()):
            raise SearchError(f"trial {trial!r}: {field} = {_shown(step)}: must be an "
                              "integer number of training steps")
        out = int(f)
    if out < 1:
        raise SearchError(f"trial {trial!r}: {field} = {out}: must be >= 1")
    return out


def check_value(trial: str, value: Any, field: str = "value") -> float:
    """The metric as a float (NaN and inf allowed: they rank last and end the trial as diverged).

    Raises:
        SearchError: naming ``trial``, ``field`` and the value."""
    if type(value) is float:                 # the common case, checked without the ABCs
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SearchError(f"trial {trial!r}: {field} = {_shown(value)}: must be a real "
                          "number (int, float or a numpy number)")
    return float(value)
