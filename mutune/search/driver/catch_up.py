"""Catching a restored scheduler core and searcher up with reports recorded after their save."""
from __future__ import annotations

from collections.abc import Iterable

from mutune.search.driver.types import STATUS_OF
from mutune.search.schedulers.contract import Judgement, Scheduler
from mutune.search.searchers.base import Searcher

__all__ = ["catch_up"]


def catch_up(core: Scheduler, searcher: Searcher,
             reports: Iterable[tuple[str, int, float]]) -> list[Judgement]:
    """Feed a restored core and searcher the reports recorded after their save, in order.

    Returns:
        The judgements made, in order (the caller records them)."""
    out: list[Judgement] = []
    for key, step, value in reports:
        searcher.observe(key, step, value)
        if core.ended(key) is not None or key in core.paused():
            continue
        js = core.on_report(key, step, value)
        out.extend(js)
        ended = core.ended(key)
        if ended is not None:
            searcher.complete(key, STATUS_OF[ended])
    return out
