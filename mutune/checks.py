"""The checks a sweep records about itself, one typed record per (sweep, kind)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = ["CheckKind", "CHECK_KINDS", "CheckRecord"]

CheckKind = Literal["preflight", "gate", "importance", "target_watch"]
CHECK_KINDS: tuple[str, ...] = get_args(CheckKind)


@dataclass(frozen=True)
class CheckRecord:
    """One check of a sweep and its JSON-able ``data``; ValueError for an unknown ``kind``, a
    ``data`` that is no mapping, or a ``data["kind"]`` that disagrees."""
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
