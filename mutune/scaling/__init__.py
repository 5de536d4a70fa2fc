"""Transfer fitting and cost arithmetic on plain arrays (numpy/scipy only; no torch, no ray).

Every function takes arrays or numbers and returns frozen results, so the rules can be tested on
synthetic data and reused by the pipeline, replays and reports alike:

- :mod:`~mutune.scaling.optimum`: the optimum of one sweep (local quadratic in log space).
- :mod:`~mutune.scaling.rules`: transfer rules log h* = a + Σ b_k·log s_k with intervals.
- :mod:`~mutune.scaling.verdict`: the named health verdict on a rule.
- :mod:`~mutune.scaling.horizon`: short-horizon bias, lr*(steps) extrapolated to the target.
- :mod:`~mutune.scaling.laws`: the loss scaling law L(N) = E + A·N^-α.
- :mod:`~mutune.scaling.published`: published batch / token / weight-decay rules.
- :mod:`~mutune.scaling.cost`: GPU-hours, ETTR and the naive counterfactual's formula.
- :mod:`~mutune.scaling.time_split`: each trial's seconds by category, the sweep's waste.
- :mod:`~mutune.scaling.ledger`: a sweep's whole ledger from its recorded trials.
"""
from mutune.scaling.cost import NaiveEstimate, ettr, gpu_hours, naive_sweep_estimate
from mutune.scaling.horizon import HorizonFit, fit_horizon
from mutune.scaling.laws import LossLaw, fit_loss_law
from mutune.scaling.optimum import Optimum, Neighbourhood, estimate_optimum
from mutune.scaling.published import (AdamWTimescale, adamw_timescale, adamw_weight_decay_for,
                                      scale_lr_for_batch, scale_lr_for_tokens)
from mutune.scaling.rules import TransferRule, fit_transfer_rule
from mutune.scaling.verdict import VERDICTS, Verdict, rule_verdict

__all__ = ["TransferRule", "fit_transfer_rule", "Optimum", "Neighbourhood", "estimate_optimum",
           "Verdict",
           "VERDICTS", "rule_verdict", "HorizonFit", "fit_horizon", "LossLaw", "fit_loss_law",
           "scale_lr_for_batch", "scale_lr_for_tokens", "AdamWTimescale", "adamw_timescale",
           "adamw_weight_decay_for", "NaiveEstimate", "naive_sweep_estimate", "gpu_hours",
           "ettr"]
