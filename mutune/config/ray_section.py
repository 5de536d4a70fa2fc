"""The ``ray`` section: where trials run (a local cluster or ``ray.address``), what each trial
holds, how failures, zombies and preemptions are handled."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mutune.config.base import FieldRuleError, StrictModel

__all__ = ["PreemptionConfig", "RayConfig", "LEASE_FACTOR"]

#: URI schemes ``ray.storage`` takes (pyarrow.fs.FileSystem.from_uri).
STORAGE_SCHEMES = frozenset({"s3", "gs", "gcs", "hdfs", "viewfs", "file", "abfs", "abfss"})

#: A trial's lease must be at least this many heartbeat intervals (a live trial may miss two).
LEASE_FACTOR = 3.0


class PreemptionConfig(StrictModel):
    """Where a trial's worker hears of a spot preemption besides SIGTERM (always on):
    ``notice_file`` — a path whose appearance is the notice (a node agent or a drain hook
    touches it); ``notice_url`` — polled every ``poll_s`` seconds, ``notice_style``
    ``status`` (404 until a notice is posted, then 200: AWS's
    ``/latest/meta-data/spot/instance-action``, with ``token_url`` for IMDSv2's session
    token) or ``body`` (200 with ``FALSE`` until it reads ``TRUE``: GCP's
    ``/computeMetadata/v1/instance/preempted``); ``ray_drain`` — Ray draining the trial's
    node (a drain Ray accepts for a busy node is a preemption). On a notice the trial finishes
    its step, checkpoints it, ends ``preempted`` and is retried from that checkpoint without
    consuming ``ray.max_failures`` (docs/architecture.md §4)."""
    notice_file: str | None = Field(default=None, min_length=1)
    notice_url: str | None = Field(default=None, pattern=r"^https?://")
    notice_style: Literal["status", "body"] = "status"
    token_url: str | None = Field(default=None, pattern=r"^https?://")
    poll_s: float = Field(default=1.0, gt=0, le=60)
    ray_drain: bool = True
    #: seconds between two questions to Ray whether the node drains (one RPC to Ray's
    #: control store per trial each time; a cloud's drain deadline is tens of seconds)
    drain_poll_s: float = Field(default=1.0, gt=0, le=60)


class RayConfig(StrictModel):
    """Execution on Ray: a local cluster of ``num_cpus`` or an existing cluster at ``address``.

    ``gpus_per_trial`` > 0 trains each trial on its CUDA device (bf16 autocast where the
    device supports bf16, the flash attention kernel on sm80 and newer; docs/architecture.md
    §6) and bills GPUs in the ledger; 0 trains on CPU threads and bills CPUs. A fraction
    below 1 packs trials on one GPU (Ray's fractional resources): at most ⌊1/fraction⌋ share
    a card, and each is billed its fraction. Above 1 it must be a whole number (Ray's rule).
    ``device_kind``: the cost table's kind the ledger prices; None (default) takes it from
    the granted device — ``cpu`` without GPUs, else the GPU type Ray detected on the cluster
    (its ``accelerator_type:…`` resource, mapped by :func:`mutune.config.cost.device_kind_of`).
    ``max_concurrent_trials`` caps trials running at once (1 makes the report order, and so
    ASHA's asynchronous decisions, reproducible); None lets the granted CPUs decide.
    ``max_failures``: retries of a failed trial (e.g. its worker was killed), each resuming
    from the trial's last checkpoint. ``heartbeat_s``: how often the driver beats for each
    running trial; ``lease_s``: how old a running trial's last beat may be before a resume
    treats it as stale (at least ``LEASE_FACTOR`` × heartbeat_s).

    Raises (on validation): a ``storage`` URI whose scheme pyarrow does not open;
    ``lease_s`` below ``LEASE_FACTOR`` × ``heartbeat_s``;
    ``gpus_per_trial`` above 1 and not whole."""
    address: str | None = None
    num_cpus: int = Field(default=2, ge=1)
    cpus_per_trial: float = Field(default=1, gt=0)
    gpus_per_trial: float = Field(default=0, ge=0)
    max_concurrent_trials: int | None = Field(default=None, ge=1)
    device_kind: str | None = Field(default=None, min_length=1)
    max_failures: int = Field(default=1, ge=0)
    heartbeat_s: float = Field(default=10.0, gt=0)
    lease_s: float = Field(default=60.0, gt=0)
    #: a running trial with no report for this many seconds since its last one is a zombie:
    #: flagged, its worker killed and not retried (None: never); set it above the slowest
    #: evaluation interval (a cold start before the first report is ``start_timeout_s``'s)
    zombie_timeout_s: float | None = Field(default=None, gt=0)
    #: a trial (a start, a promotion, a retry) with no first report this many seconds after
    #: its grant is a zombie too (None: never); the zombie timeout counts from that report
    start_timeout_s: float | None = Field(default=None, gt=0)
    #: the longest a trial holds back a report that no decision waits for (no checkpoint,
    #: not a start's first, not the first at or past a rung milestone, a divergence limit's
    #: step or max_t; all numbers finite), to send it with its next one instead of waiting
    #: for the driver to take each (mutune/search/trial/report_hold.py); capped at a quarter
    #: of ``zombie_timeout_s`` and ``start_timeout_s``; 0: every report at once. Decisions
    #: and records are unchanged
    report_hold_s: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    #: notice file and URL that preempt a trial (SIGTERM always does)
    preemption: PreemptionConfig = Field(default_factory=PreemptionConfig)
    #: remote checkpoint storage (None: the node-local copy only): a folder every node
    #: mounts at the same path, or a pyarrow filesystem URI (``s3://bucket/prefix``,
    #: ``gs://…``, ``hdfs://…``, ``file:///…``); checkpoints are uploaded in the background
    #: and a trial restarted without its local copy restores from there
    #: (mutune/search/trial/remote.py, docs/architecture.md §4.6)
    storage: str | None = Field(default=None, min_length=1)

    def report_hold_window(self) -> float:
        """``report_hold_s``, capped at a quarter of ``zombie_timeout_s`` and of
        ``start_timeout_s`` (so held reports never make a trial look silent), seconds."""
        caps = [t / 4 for t in (self.zombie_timeout_s, self.start_timeout_s) if t is not None]
        return min([self.report_hold_s, *caps])

    @property
    def priced_kind(self) -> str | None:
        """The device kind known before the cluster starts: ``device_kind``, else ``cpu``
        for CPU trials; None for GPU trials whose kind comes from the granted device."""
        return self.device_kind or ("cpu" if not self.gpus_per_trial else None)

    @model_validator(mode="after")
    def _lease(self) -> "RayConfig":
        if self.storage and "://" in self.storage:
            scheme = self.storage.split("://", 1)[0].lower()
            if scheme not in STORAGE_SCHEMES:
                raise FieldRuleError("storage", self.storage,
                                     f"scheme {scheme!r} is not a pyarrow filesystem (use a "
                                     "shared folder's path or one of "
                                     f"{', '.join(sorted(STORAGE_SCHEMES))})")
        g = self.gpus_per_trial
        if g > 1 and g != int(g):
            raise FieldRuleError("gpus_per_trial", g,
                                 "above 1 it must be a whole number of GPUs (Ray grants "
                                 "fractions of one GPU only)")
        if not self.lease_s >= LEASE_FACTOR * self.heartbeat_s:
            raise FieldRuleError("lease_s", self.lease_s,
                                 f"must be >= {LEASE_FACTOR:g} × ray.heartbeat_s "
                                 f"({self.heartbeat_s}) = {LEASE_FACTOR * self.heartbeat_s:g}, "
                                 "so a live trial that misses a beat or two is never reaped as "
                                 "stale")
        return self
