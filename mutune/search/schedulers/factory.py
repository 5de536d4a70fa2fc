"""Build a scheduler core from settings, or from its saved state (one entry point for both)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mutune.errors import SearchError
from mutune.search.schedulers.asha import ASHA
from mutune.search.schedulers.contract import Scheduler
from mutune.search.schedulers.hyperband import Hyperband
from mutune.search.schedulers.promotion import PromotionASHA

__all__ = ["make_scheduler", "scheduler_from_state", "KINDS", "VARIANTS"]

KINDS = ("asha", "hyperband")
VARIANTS = ("stopping", "promotion")


def make_scheduler(kind: str, *, grace_period: int, reduction_factor: int, max_t: int,
                   mode: str = "min", seed: int = 0, variant: str = "stopping") -> Scheduler:
    """A fresh core (``asha``/``hyperband``, ``stopping``/``promotion``); r, η, max_t in steps.

    Raises:
        SearchError: unknown kind or variant, or a setting out of range (names it)."""
    if variant not in VARIANTS:
        raise SearchError(f"variant = {variant!r}: must be one of {VARIANTS}")
    r, eta = grace_period, reduction_factor
    if kind == "asha":
        rungs = ASHA if variant == "stopping" else PromotionASHA
        return rungs(grace_period=r, reduction_factor=eta, max_t=max_t, mode=mode)
    if kind == "hyperband":
        return Hyperband(grace_period=r, reduction_factor=eta, max_t=max_t, mode=mode,
                         seed=seed, variant=variant)
    raise SearchError(f"scheduler kind = {kind!r}: must be one of {KINDS}")


def scheduler_from_state(state: dict[str, Any]) -> Scheduler:
    """Rebuild whichever core wrote ``state`` (its ``kind`` says); SearchError if it cannot."""
    if not isinstance(state, dict):
        raise SearchError(f"scheduler state must be a mapping, got {type(state).__name__}")
    loaders: dict[str, Callable[[dict[str, Any]], Scheduler]] = {
        "asha": ASHA.from_state, "asha-promotion": PromotionASHA.from_state,
        "hyperband": Hyperband.from_state}
    load = loaders.get(str(state.get("kind")))
    if load is None:
        raise SearchError(f"scheduler state kind = {state.get('kind')!r}: must be one of "
                          f"{sorted(loaders)}")
    return load(state)
