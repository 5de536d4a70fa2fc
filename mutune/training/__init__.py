"""Training inside a worker: one trial's run (:func:`run_loop`), whichever loop trains it.

* :mod:`mutune.training.run` — :func:`run_loop`: build, restore, run the loop, end.
* :mod:`mutune.training.spec` — what the trial trains (:class:`TrialSpec`), read from the
  worker's config dict.
* :mod:`mutune.training.session` — the trial's models, optimizers, schedules, checkpoints and
  the ledger's figures (:class:`TrialSession`).
* :mod:`mutune.training.context` — what a loop receives (:class:`LoopContext`): the contract a
  ``train.loop`` plugin is written against (docs/architecture.md §5).
* :mod:`mutune.training.default_loop` — mutune's own loop (:func:`train_steps`).
* :mod:`mutune.training.evaluation`, :mod:`mutune.training.schedule` — the losses at a report
  and the learning-rate schedules.
"""
from __future__ import annotations

from mutune.training.context import LoopContext, LoopEnd
from mutune.training.default_loop import train_steps
from mutune.training.run import run_loop
from mutune.training.session import LEDGER_KEYS, TrialSession
from mutune.training.spec import TrialPoint, TrialSpec

__all__ = ["run_loop", "LoopContext", "LoopEnd", "TrialSession", "TrialSpec", "TrialPoint",
           "train_steps", "LEDGER_KEYS"]
