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
    """Where a trial's worker hears of a spot preemption besides SIGTERM (always on); on a
    notice the trial finishes its step, checkpoints it, ends ``preempted`` and is retried from
    that checkpoint without consuming ``ray.max_failures`` (docs/architecture.md §4.6)."""
    notice_file: str | None = Field(
        default=None, min_length=1, description="a path whose appearance is the notice (a "
        "node agent or a drain hook touches it)")
    notice_url: str | None = Field(
        default=None, pattern=r"^https?://", description="a URL polled every `poll_s` s for "
        "the notice")
    notice_style: Literal["status", "body"] = Field(
        default="status", description="`status`: 404 until a notice, then 200 (AWS style); "
        "`body`: `FALSE` until it reads `TRUE` (GCP style)")
    token_url: str | None = Field(
        default=None, pattern=r"^https?://", description="where IMDSv2's session token comes "
        "from (AWS)")
    poll_s: float = Field(
        default=1.0, gt=0, le=60, description="seconds between polls of `notice_url`")
    ray_drain: bool = Field(
        default=True, description="Ray draining the trial's node is a preemption")
    drain_poll_s: float = Field(
        default=1.0, gt=0, le=60, description="seconds between two questions to Ray whether "
        "the node drains (one RPC per trial each time)")


class RayConfig(StrictModel):
    """Execution on Ray: a local cluster of ``num_cpus`` or an existing cluster at ``address``.

    Raises (on validation): a ``storage`` URI whose scheme pyarrow does not open;
    ``lease_s`` below ``LEASE_FACTOR`` × ``heartbeat_s``;
    ``gpus_per_trial`` above 1 and not whole."""
    address: str | None = Field(
        default=None, description="an existing Ray cluster (None: start a local one)")
    num_cpus: int = Field(default=2, ge=1, description="CPUs of the local cluster")
    cpus_per_trial: float = Field(default=1, gt=0, description="CPUs each trial holds")
    gpus_per_trial: float = Field(
        default=0, ge=0, description="GPUs per trial (0: CPU trials, billed as CPUs); a "
        "fraction below 1 packs ⌊1/fraction⌋ trials on one card, each billed its fraction; "
        "above 1 a whole number. bf16 autocast and the flash attention kernel only where the "
        "device takes them (compute capability 8.0+)")
    max_concurrent_trials: int | None = Field(
        default=None, ge=1, description="cap on trials running at once (1 makes ASHA's "
        "asynchronous decisions reproducible); None: the granted CPUs decide")
    device_kind: str | None = Field(
        default=None, min_length=1, description="the cost table's kind the ledger prices; "
        "None: `cpu` for CPU trials, else the GPU type Ray detected (`H100` → `h100`)")
    max_failures: int = Field(
        default=1, ge=0, description="retries of a failed trial (a crash, a SIGKILL, the OOM "
        "killer), each from its last checkpoint; a preemption is not a failure")
    heartbeat_s: float = Field(
        default=10.0, gt=0, description="how often the driver beats for each running trial, s")
    lease_s: float = Field(
        default=60.0, gt=0, description="how old a running trial's last beat may be before a "
        "resume treats it as stale, s (at least 3 × `heartbeat_s`)")
    zombie_timeout_s: float | None = Field(
        default=None, gt=0, description="a running trial with no report for this long since "
        "its last is a zombie: its worker is killed and it is not retried (None: never); set it "
        "above the slowest evaluation interval")
    start_timeout_s: float | None = Field(
        default=None, gt=0, description="a trial (a start, a promotion, a retry) with no first "
        "report this long after its grant is a zombie too (None: never)")
    report_hold_s: float = Field(
        default=1.0, ge=0, allow_inf_nan=False, description="the longest a trial holds back a "
        "report no decision waits for, to send it with its next one (0: off); capped at a "
        "quarter of `zombie_timeout_s` and `start_timeout_s`; records and decisions unchanged")
    preemption: PreemptionConfig = Field(
        default_factory=PreemptionConfig, description="notice file and URL that preempt a "
        "trial (`ray.preemption.*`; SIGTERM always does)")
    storage: str | None = Field(
        default=None, min_length=1, description="remote checkpoint storage: a folder every "
        "node mounts, or a pyarrow URI (`s3://bucket/prefix`, `gs://…`, `hdfs://…`); uploads "
        "run in the background and a trial restarted without its local copy restores from "
        "there (None: node-local only)")

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
