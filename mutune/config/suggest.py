""""Did you mean …": the known names closest to a misspelt key or hyperparameter.

:func:`section_keys` finds which config section a pydantic error location points into (walking
the models' field annotations: nested models, ``dict[str, X]`` values, discriminated-union
tags), so an unknown key can be compared with the keys that section does take;
:func:`did_you_mean` phrases the closest ones (:func:`difflib.get_close_matches`).
"""
from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

__all__ = ["SUGGEST_CUTOFF", "SUGGEST_MARGIN", "close_matches", "did_you_mean", "section_keys"]

#: How alike (difflib's ratio, 0–1) a known name must be to the given one to be suggested.
SUGGEST_CUTOFF = 0.6

#: Suggestions less alike than the best one by more than this are left out.
SUGGEST_MARGIN = 0.1


def close_matches(word: str, known: Iterable[str], *, n: int = 3) -> list[str]:
    """Up to ``n`` names of ``known`` closest to ``word``, best first (ties in
    ``known``'s order); [] when none is close.

    Closeness is :func:`difflib.get_close_matches` (ratio ≥ :data:`SUGGEST_CUTOFF`,
    case-insensitive), keeping only the names within :data:`SUGGEST_MARGIN` of the best one;
    when none is that close, the names ``word`` (at least 3 characters) begins are suggested
    (``peak`` → ``peak_flops``). Names come back as spelt in ``known``.
    """
    by_lower: dict[str, str] = {}
    for name in known:
        by_lower.setdefault(str(name).lower(), str(name))
    w = str(word).lower()
    hits = difflib.get_close_matches(w, list(by_lower), n=n, cutoff=SUGGEST_CUTOFF)
    if hits:
        ratio = {h: difflib.SequenceMatcher(None, w, h).ratio() for h in hits}
        order = list(by_lower)
        best = max(ratio.values())
        # equally close names in the order the section declares them
        hits = sorted((h for h in hits if ratio[h] >= best - SUGGEST_MARGIN),
                      key=lambda h: (-ratio[h], order.index(h)))
    elif len(w) >= 3:
        hits = [k for k in by_lower if k.startswith(w)][:n]
    return [by_lower[h] for h in hits if by_lower[h] != word]


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``"did you mean 'a'?"`` / ``"did you mean 'a' or 'b'?"`` for the names of ``known``
    closest to ``word``; ``""`` when none is close."""
    quoted = [repr(m) for m in close_matches(word, known)]
    if not quoted:
        return ""
    text = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f"did you mean {text}?"


def _unwrap(tp: Any) -> Any:
    """``tp`` without ``Annotated[…]`` and without ``None`` in an optional."""
    while True:
        origin = get_origin(tp)
        if origin is typing.Annotated:
            tp = get_args(tp)[0]
            continue
        if origin in (Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            if len(args) == 1:
                tp = args[0]
                continue
        return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _tagged(members: Sequence[Any], tag: str) -> Any:
    """The union member a location's tag names: a model whose class name is ``tag``, or one
    with a ``Literal`` field admitting ``tag`` (a discriminated union's tag); None if none."""
    models = [_unwrap(m) for m in members]
    for m in models:
        if _is_model(m) and m.__name__ == tag:
            return m
    for m in models:
        if _is_model(m) and any(get_origin(f.annotation) is Literal
                                and tag in get_args(f.annotation)
                                for f in m.model_fields.values()):
            return m
    return None


def section_keys(root: type[BaseModel], loc: Sequence[str | int]) -> list[str] | None:
    """The keys the section holding ``loc[-1]`` takes.

    Args:
        root: the model validated (e.g. :class:`~mutune.config.SweepConfig`).
        loc: a pydantic error location inside it, e.g. ``("search", "scheduler",
            "grace_perod")`` or ``("search", "space", "lr", "loguniform", "lo")`` (validator
            steps such as ``function-after[…]`` are skipped).
    Returns:
        The field names of the model ``loc[:-1]`` leads to; None when the path does not lead
        to a model (a free-form mapping, or a path the models do not have).
    """
    tp: Any = root
    for part in [p for p in loc[:-1] if not str(p).startswith("function-")]:
        tp = _unwrap(tp)
        origin = get_origin(tp)
        if _is_model(tp):
            field = tp.model_fields.get(str(part))
            if field is None:
                return None
            tp = field.annotation
        elif origin in (dict, Mapping):
            tp = get_args(tp)[1]
        elif origin in (list, tuple, set, frozenset):
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            tp = _tagged(get_args(tp), str(part))
            if tp is None:
                return None
        else:
            return None
    tp = _unwrap(tp)
    return list(tp.model_fields) if _is_model(tp) else None
