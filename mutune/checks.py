"""The checks a sweep records about itself, as one typed record.

A sweep records four checks beside its fitted rules and laws: what it checked before the first
trial (``preflight``), what the transfer gate decided (``gate``), how much each searched
hyperparameter mattered at the widest proxy (``importance``) and how the target's curve
compared with its proxies' (``target_watch``). Each is a :class:`CheckRecord`; the results
store keeps one per (sweep, kind) in its ``sweep_checks`` table (docs/architecture.md §7).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = ["CheckKind", "CHECK_KINDS", "CheckRecord"]

#: ``preflight``: {"warnings": [str], "coord_check": {...} or None};
#: ``gate``: {"setting", "max_rounds", "rounds", "first_verdicts", "final_verdicts",
#: "gpu_hours", "outcome", "warning"?, "reason"?};
#: ``importance``: {"width", "depth"?, "step", "n_trials", "importances", "method",
#: "error"?}; ``target_watch``: the target's curve against its proxies'
#: (:func:`mutune.pipeline.target_stage.proxy_curve`) or {"skipped": why}.
CheckKind = Literal["preflight", "gate", "importance", "target_watch"]
CHECK_KINDS: tuple[str, ...] = get_args(CheckKind)


@dataclass(frozen=True)
class CheckRecord:
    """One check of a sweep: its ``kind`` (one of :data:`CHECK_KINDS`) and its JSON-able
    ``data`` (the keys :data:`CheckKind` lists for that kind).

    Raises:
        ValueError: ``kind`` is not a check kind, or ``data`` is not a mapping or holds a
            ``kind`` key that disagrees.
    """
    kind: CheckKind
    data: Mapping[str, Any]

    def __post_init__(self) -> None:
        if self.kind not in CHECK_KINDS:
            raise ValueError(f"CheckRecord.kind = {self.kind!r}: must be one of "
                             f"{', '.join(CHECK_KINDS)}")
        if not isinstance(self.data, Mapping):
            raise ValueError(f"CheckRecord.data = {type(self.data).__name__}: must be a "
                             "mapping")
        if self.data.get("kind", self.kind) != self.kind:
            raise ValueError(f"CheckRecord.data['kind'] = {self.data['kind']!r}: must be "
                             f"the record's kind {self.kind!r} or absent")
