"""The recorder contract: how the stages hand their results to the system of record.

The stages (``search``, the target launch, the ledger) never import the store. The pipeline hands
them an object that satisfies :class:`Recorder`; :class:`mutune.services.store.Store` is the
implementation that writes to the results database, and :class:`MemoryRecorder` keeps everything
in lists for tests and dry runs. Every method is called in the driver process (Ray workers never
see the recorder), in the order things happen, and must make its write durable before returning:
a crash after a call returns loses nothing the call recorded.

Identifiers returned by the ``*_started`` methods are positive integers unique within the recorder.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["Recorder", "MemoryRecorder", "TRIAL_STATUSES"]

#: Terminal trial statuses. ``completed``: ran to max_t; ``stopped``: ended by the scheduler at a
#: rung (or by the budget at a rung); ``diverged``: reported a NaN/inf metric; ``failed``: raised
#: an error; ``cancelled``: ended by ``mutune cancel`` before its rung.
TRIAL_STATUSES = ("running", "completed", "stopped", "diverged", "failed", "cancelled")


@runtime_checkable
class Recorder(Protocol):
    """What the pipeline records, as it happens (DESIGN.md §2, §7)."""

    def sweep_started(self, config: Mapping[str, Any], seed: int,
                      provenance: Mapping[str, Any]) -> int:
        """A sweep begins; ``config`` is the validated config as JSON-able data. Returns its id."""

    def proxy_sweep_started(self, sweep_id: int, width: int,
                            settings: Mapping[str, Any]) -> int:
        """One width's sweep begins; ``settings`` holds scheduler settings. Returns its id."""

    def trial_started(self, sweep_id: int, proxy_sweep_id: int | None, kind: str, key: str,
                      width: int, config: Mapping[str, Any], seed: int) -> int:
        """A trial is granted its resources. ``kind`` is ``proxy`` or ``target``; ``key`` is
        the execution engine's trial name. Returns the trial id."""

    def trial_reported(self, trial_id: int, step: int, metrics: Mapping[str, float],
                       seq: int) -> None:
        """An evaluation report at training ``step``; ``seq`` orders all reports and decisions
        of the sweep. Idempotent on (trial, step)."""

    def scheduler_decided(self, trial_id: int, milestone: int, value: float | None,
                          cutoff: float | None, decision: str, seq: int) -> None:
        """The scheduler judged the trial at rung ``milestone`` (steps) with ``value`` against
        ``cutoff`` and decided ``decision`` (``continue``/``stop``/``diverged``)."""

    def scheduler_saved(self, proxy_sweep_id: int, state: Mapping[str, Any],
                        searcher_state: Mapping[str, Any] | None, seq: int) -> None:
        """The scheduler core's and the searcher's state (versioned JSON dicts) after the
        decision numbered ``seq``: what a resumed sweep restores."""

    def heartbeat(self, trial_id: int) -> None:
        """The running trial is alive (beaten through the driver at ``ray.heartbeat_s``)."""

    def trial_checkpoint_dir(self, trial_id: int, path: str) -> None:
        """The folder where the trial's checkpoints are kept (for a resume)."""

    def trial_resumed(self, trial_id: int, reason: str) -> None:
        """A trial of a resumed sweep continues from its checkpoint (running again);
        ``reason`` says why it had stopped (e.g. a stale heartbeat)."""

    def trial_finished(self, trial_id: int, status: str, reason: str | None,
                       timing: Mapping[str, float]) -> None:
        """The trial released its resources with a terminal ``status`` (TRIAL_STATUSES).
        ``timing`` keys: allocated_s, productive_s, eval_s, overhead_s, steps, samples,
        devices (count granted, may be fractional), restarts, repeated_steps, recovery_s,
        checkpoint_s, plus device_kind (str) — seconds are wall seconds."""

    def trial_logged(self, trial_id: int, stdout: str, stderr: str,
                     traceback: str | None) -> None:
        """What the trial wrote (the tails of its stdout and stderr) and, when it raised, the
        formatted traceback. Called once per trial, after it finished; a repeat replaces."""

    def stop_requested(self, sweep_id: int) -> str | None:
        """Why the sweep should stop now (e.g. ``cancelled by user``), or None to go on.
        Polled by the driver between trial events; must be cheap."""

    def proxy_sweep_finished(self, proxy_sweep_id: int, best: Mapping[str, Any]) -> None:
        """The width's sweep ended; ``best`` holds trial_id, milestone, config, val_loss,
        trials (count)."""

    def rule_fitted(self, sweep_id: int, rule: Mapping[str, Any]) -> None:
        """A transfer rule was fitted; ``rule`` holds hyperparameter, intercept, slope,
        widths, optima, target_width, transferred_value, formula."""

    def law_fitted(self, sweep_id: int, law: Mapping[str, Any]) -> None:
        """A scaling law was fitted; ``law`` holds kind (e.g. ``loss_vs_params``), its
        parameters, and its prediction for the target with an interval."""

    def target_started(self, sweep_id: int, trial_id: int, width: int,
                       config: Mapping[str, Any]) -> int:
        """The target run (already started as trial ``trial_id``) begins. Returns its id."""

    def target_finished(self, target_id: int, val_loss: float | None, status: str) -> None:
        """The target run ended with its final validation loss (nats)."""

    def ledger_recorded(self, sweep_id: int, entries: Sequence[Mapping[str, Any]]) -> None:
        """Cost figures: each entry has scope, name, value, unit, and optional trial_id,
        formula (str) and inputs (mapping)."""

    def sweep_finished(self, sweep_id: int, status: str, reason: str | None = None) -> None:
        """The sweep ended (``completed``, ``failed``, …)."""

    def sweep_resumed(self, sweep_id: int) -> None:
        """An interrupted sweep continues (``mutune resume``): running again."""


class MemoryRecorder:
    """A :class:`Recorder` that keeps every call in memory (``self.events``), for tests.

    ``self.events`` is a list of ``(method_name, kwargs)`` in call order; ids count from 1.
    """

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
        """The kwargs of every call to method ``name``, in order."""
        return [kw for n, kw in self.events if n == name]

    def sweep_started(self, config, seed, provenance):
        return self._new_id("sweep_started", config=dict(config), seed=seed,
                            provenance=dict(provenance))

    def proxy_sweep_started(self, sweep_id, width, settings):
        return self._new_id("proxy_sweep_started", sweep_id=sweep_id, width=width,
                            settings=dict(settings))

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

    def heartbeat(self, trial_id):
        self._log("heartbeat", trial_id=trial_id)

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

    def proxy_sweep_finished(self, proxy_sweep_id, best):
        self._log("proxy_sweep_finished", proxy_sweep_id=proxy_sweep_id, best=dict(best))

    def rule_fitted(self, sweep_id, rule):
        self._log("rule_fitted", sweep_id=sweep_id, rule=dict(rule))

    def law_fitted(self, sweep_id, law):
        self._log("law_fitted", sweep_id=sweep_id, law=dict(law))

    def target_started(self, sweep_id, trial_id, width, config):
        return self._new_id("target_started", sweep_id=sweep_id, trial_id=trial_id,
                            width=width, config=dict(config))

    def target_finished(self, target_id, val_loss, status):
        self._log("target_finished", target_id=target_id, val_loss=val_loss, status=status)

    def ledger_recorded(self, sweep_id, entries):
        self._log("ledger_recorded", sweep_id=sweep_id, entries=[dict(e) for e in entries])

    def sweep_finished(self, sweep_id, status, reason=None):
        self._log("sweep_finished", sweep_id=sweep_id, status=status, reason=reason)

    def sweep_resumed(self, sweep_id):
        self._log("sweep_resumed", sweep_id=sweep_id)
