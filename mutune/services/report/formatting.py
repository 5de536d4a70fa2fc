"""Formatting shared by the terminal tables: numbers (``—`` for what is missing), and tables
that wrap a cell on a narrow terminal instead of cutting it with "…"."""
from __future__ import annotations

import math
from typing import Any

__all__ = ["fmt_num", "fmt_interval", "unclipped"]


def fmt_num(v: Any, fmt: str = ".4g") -> str:
    """``v`` formatted with ``fmt`` (a :func:`format` spec); ``"—"`` for None."""
    return "—" if v is None else format(v, fmt)


def fmt_interval(iv: Any) -> str:
    """``[lo, hi]`` at 4 significant digits; ``"—"`` when missing or not finite."""
    if not iv or any(v is None or not math.isfinite(float(v)) for v in iv):
        return "—"
    return f"[{float(iv[0]):.4g}, {float(iv[1]):.4g}]"


def unclipped(table: Any) -> Any:
    """``table`` (a rich Table) with every column folding its cells onto more lines when the
    terminal is too narrow, so no name and no number is ever cut short; returns it."""
    for column in table.columns:
        column.overflow = "fold"
    return table
