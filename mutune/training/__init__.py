"""Training inside a worker: one trial's run (:func:`run_loop`), whichever loop trains it."""
from __future__ import annotations

from mutune.training.context import LoopContext, LoopEnd
from mutune.training.default_loop import train_steps
from mutune.training.run import run_loop
from mutune.training.session import LEDGER_KEYS, TrialSession
from mutune.training.spec import TrialPoint, TrialSpec

__all__ = ["run_loop", "LoopContext", "LoopEnd", "TrialSession", "TrialSpec", "TrialPoint",
           "train_steps", "LEDGER_KEYS"]
