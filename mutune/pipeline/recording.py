"""What the main job's stages record (:class:`StageRecorder`, :class:`Recorder`), and an
in-memory recorder for tests and checks; calls are in order and durable when they return."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from mutune.checks import CheckRecord
from mutune.search.recording import TRIAL_STATUSES, SweepControl, TrialRecorder

__all__ = ["StageRecorder", "Recorder", "MemoryRecorder", "TrialRecorder", "SweepControl",
           "TRIAL_STATUSES", "CheckRecord"]


@runtime_checkable
class StageRecorder(Protocol):
    """What the stages of the main job record (docs/architecture.md §2, §7)."""

    def sweep_started(self, config: Mapping[str, Any], seed: int,
                      provenance: Mapping[str, Any]) -> int:
        """A sweep begins; ``config`` is the validated config as JSON-able data. Returns its id."""

    def sweep_resumed(self, sweep_id: int) -> None:
        """An interrupted sweep continues (``mutune resume``, a restarted server)."""

    def proxy_sweep_started(self, sweep_id: int, width: int,
                            settings: Mapping[str, Any]) -> int:
        """One width's sweep begins; ``settings`` holds scheduler settings. Returns its id."""

    def proxy_sweep_finished(self, proxy_sweep_id: int, best: Mapping[str, Any]) -> None:
        """The width's sweep ended with its ``best`` trial."""

    def rule_fitted(self, sweep_id: int, rule: Mapping[str, Any]) -> None:
        """A transfer rule was fitted; a rule recorded again for (sweep, hyperparameter)
        replaces it."""

    def law_fitted(self, sweep_id: int, law: Mapping[str, Any]) -> None:
        """A scaling law was fitted; a law recorded again for (sweep, kind) replaces it."""

    def check_recorded(self, sweep_id: int, check: CheckRecord) -> None:
        """One of the sweep's checks; a check recorded again for (sweep, kind) replaces it."""

    def target_started(self, sweep_id: int, trial_id: int, width: int,
                       config: Mapping[str, Any]) -> int:
        """The target run (already started as trial ``trial_id``) begins. Returns its id."""

    def target_finished(self, target_id: int, val_loss: float | None, status: str,
                        model_dir: str | None = None) -> None:
        """The target run ended with its final validation loss (nats) and kept model's folder."""

    def ledger_recorded(self, sweep_id: int, entries: Sequence[Mapping[str, Any]]) -> None:
        """The sweep's cost entries; a ledger recorded again replaces the one before."""

    def sweep_finished(self, sweep_id: int, status: str, reason: str | None = None) -> None:
        """The sweep ended (``completed``, ``failed``, …)."""


@runtime_checkable
class Recorder(StageRecorder, TrialRecorder, Protocol):
    """Everything a sweep records: the stages' rows and every trial's."""


class MemoryRecorder:
    """A :class:`Recorder` and SweepControl that keeps every call in ``events``; ids count from
    1."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self._next_id = 0
        self.stop_reason: str | None = None

    def _new_id(self, name: str, **kwargs: Any) -> int:
        self._next_id += 1
        self.events.append((name, {"id": self._next_id, **kwargs}))
        return self._next_id

    def _log(self, name: str, **kwargs: Any) -> None:
        self.events.append((name, kwargs))

    def of(self, name: str) -> list[dict[str, Any]]:
        return [kw for n, kw in self.events if n == name]

    def sweep_started(self, config, seed, provenance):
        return self._new_id("sweep_started", config=dict(config), seed=seed,
                            provenance=dict(provenance))

    def sweep_resumed(self, sweep_id):
        self._log("sweep_resumed", sweep_id=sweep_id)

    def proxy_sweep_started(self, sweep_id, width, settings):
        return self._new_id("proxy_sweep_started", sweep_id=sweep_id, width=width,
                            settings=dict(settings))

    def proxy_sweep_finished(self, proxy_sweep_id, best):
        self._log("proxy_sweep_finished", proxy_sweep_id=proxy_sweep_id, best=dict(best))

    def rule_fitted(self, sweep_id, rule):
        self._log("rule_fitted", sweep_id=sweep_id, rule=dict(rule))

    def law_fitted(self, sweep_id, law):
        self._log("law_fitted", sweep_id=sweep_id, law=dict(law))

    def check_recorded(self, sweep_id, check):
        self._log("check_recorded", sweep_id=sweep_id, check=check)

    def target_started(self, sweep_id, trial_id, width, config):
        return self._new_id("target_started", sweep_id=sweep_id, trial_id=trial_id,
                            width=width, config=dict(config))

    def target_finished(self, target_id, val_loss, status, model_dir=None):
        self._log("target_finished", target_id=target_id, val_loss=val_loss, status=status,
                  model_dir=model_dir)

    def ledger_recorded(self, sweep_id, entries):
        self._log("ledger_recorded", sweep_id=sweep_id, entries=[dict(e) for e in entries])

    def sweep_finished(self, sweep_id, status, reason=None):
        self._log("sweep_finished", sweep_id=sweep_id, status=status, reason=reason)

    def trial_started(self, sweep_id, proxy_sweep_id, kind, key, width, config, seed):
        return self._new_id("trial_started", sweep_id=sweep_id, proxy_sweep_id=proxy_sweep_id,
                            kind=kind, key=key, width=width, config=dict(config), seed=seed)

    def trial_reported(self, trial_id, step, metrics, seq):
        self._log("trial_reported", trial_id=trial_id, step=step, metrics=dict(metrics), seq=seq)

    def scheduler_decided(self, trial_id, milestone, value, cutoff, decision, seq):
        self._log("scheduler_decided", trial_id=trial_id, milestone=milestone, value=value,
                  cutoff=cutoff, decision=decision, seq=seq)

    def scheduler_saved(self, proxy_sweep_id, state, searcher_state, seq):
        self._log("scheduler_saved", proxy_sweep_id=proxy_sweep_id, state=state,
                  searcher_state=searcher_state, seq=seq)

    def trial_checkpoint_dir(self, trial_id, path):
        self._log("trial_checkpoint_dir", trial_id=trial_id, path=path)

    def trial_resumed(self, trial_id, reason):
        self._log("trial_resumed", trial_id=trial_id, reason=reason)

    def trial_finished(self, trial_id, status, reason, timing):
        self._log("trial_finished", trial_id=trial_id, status=status, reason=reason,
                  timing=dict(timing))

    def trial_logged(self, trial_id, stdout, stderr, traceback):
        self._log("trial_logged", trial_id=trial_id, stdout=stdout, stderr=stderr,
                  traceback=traceback)

    def stop_requested(self, sweep_id):
        """``self.stop_reason`` (set it to make the sweep stop)."""
        return self.stop_reason

    def heartbeat(self, trial_id):
        self._log("heartbeat", trial_id=trial_id)
