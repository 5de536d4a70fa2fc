"""Transfer fitting and cost arithmetic on plain arrays (numpy only; no torch, no ray).

Every function takes arrays or numbers and returns frozen results, so the rules can be tested on
synthetic data and reused by the pipeline, replays and reports alike.
"""
from mutune.scaling.cost import NaiveEstimate, ettr, gpu_hours, naive_sweep_estimate
from mutune.scaling.rules import TransferRule, fit_transfer_rule

__all__ = ["TransferRule", "fit_transfer_rule", "NaiveEstimate", "naive_sweep_estimate",
           "gpu_hours", "ettr"]
