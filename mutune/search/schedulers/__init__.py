"""Scheduler cores: they decide which trial goes on, pauses, is promoted or stops.

One contract (:class:`Scheduler`, :mod:`.contract`), three cores — :class:`ASHA` (stopping),
:class:`PromotionASHA` and :class:`Hyperband` (either variant per bracket) — over one rung
encoding (:mod:`.rungs`), with every report checked first (:mod:`.inputs`). Pure Python: no
Ray, no database. :func:`planned_trial_steps` is the dry run's expectation of a sweep.
"""
from mutune.search.schedulers.asha import ASHA
from mutune.search.schedulers.contract import TERMINAL, Decision, Judgement, Scheduler
from mutune.search.schedulers.factory import KINDS, VARIANTS, make_scheduler, scheduler_from_state
from mutune.search.schedulers.hyperband import Hyperband, bracket_sizes
from mutune.search.schedulers.planned_steps import DEFAULT_TRIAL_OVERHEAD_S, planned_trial_steps
from mutune.search.schedulers.promotion import PromotionASHA
from mutune.search.schedulers.rungs import bracket_count, rung_milestones

__all__ = ["Scheduler", "Decision", "Judgement", "TERMINAL", "ASHA", "PromotionASHA",
           "Hyperband", "bracket_sizes", "make_scheduler", "scheduler_from_state", "KINDS",
           "VARIANTS", "rung_milestones", "bracket_count", "planned_trial_steps",
           "DEFAULT_TRIAL_OVERHEAD_S"]
