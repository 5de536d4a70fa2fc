"""The simulator as the sweep's :class:`~mutune.search.backends.base.Backend`: the whole main
job — proxy sweeps, confirmation designs, gate rounds, the target, the ledger, the report —
on synthetic learning curves and a simulated clock, with no Ray and no training."""
from __future__ import annotations

import contextlib
import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mutune.config import RayConfig
from mutune.errors import SearchError
from mutune.search.backends.base import RunSettings
from mutune.search.backends.groups import (GroupSpec, RunOutcome, driver_group,
                                           finished_trials, make_core)
from mutune.search.backends.trial_record import TrialRecord
from mutune.search.driver import ActionKind, SweepDriver
from mutune.search.schedulers.contract import Judgement

__all__ = ["SyntheticLoss", "SimulatedBackend"]


@dataclass(frozen=True)
class SyntheticLoss:
    """A μP-shaped loss surface: wider is better, the optimum does not move with width.

    loss(w, h, s) = floor + scale · (w / base_width)^(−exponent)
    + curvature · Σ_k (log2 h_k − log2 h*_k(s))² + transient / √s, plus Gaussian noise of
    standard deviation ``noise`` drawn from (seed, width, step) — the width-scaling form of
    Kaplan et al. 2020 (§3, L(N) ∝ N^−α) with the width-independent optimum μP gives
    (Yang et al. 2022, Tensor Programs V, §3). With ``lr_drift`` the learning rate's optimum
    moves with the horizon, as short runs favour large rates (Wu et al. 2018, ICLR, §3):
    log2 lr*(s) = log2 optimum["lr"] + lr_drift · log2(s / lr_horizon), the same at every
    width."""
    optimum: dict[str, float] = field(default_factory=lambda: {"lr": 0.01,
                                                               "output_mult": 1.0})
    floor: float = 0.5
    scale: float = 1.0
    exponent: float = 0.5
    base_width: int = 16
    curvature: float = 0.05
    transient: float = 1.0
    noise: float = 0.002
    lr_drift: float = 0.0          # octaves of lr* per doubling of the steps trained
    lr_horizon: int = 1            # the steps at which ``optimum["lr"]`` is the optimum

    def __call__(self, width: int, hparams: dict[str, Any], seed: int,
                 step: int) -> dict[str, float]:
        """The report of a trial at ``width`` with ``hparams`` and ``seed`` at ``step``
        (≥ 1): ``val_loss``, ``test_loss``, ``train_loss`` and their standard errors."""
        at = {k: v * (2.0 ** (self.lr_drift * math.log2(step / self.lr_horizon))
                      if k == "lr" else 1.0) for k, v in self.optimum.items()}
        off = sum((math.log2(float(hparams[k])) - math.log2(v)) ** 2
                  for k, v in at.items()
                  if isinstance(hparams.get(k), (int, float)) and float(hparams[k]) > 0)
        mean = (self.floor + self.scale * (width / self.base_width) ** -self.exponent
                + self.curvature * off + self.transient / math.sqrt(step))
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), int(width), int(step)]))
        val, test, train = mean + self.noise * rng.standard_normal(3)
        return {"val_loss": float(val), "test_loss": float(test),
                "train_loss": float(train), "val_loss_se": self.noise,
                "test_loss_se": self.noise}


class SimulatedBackend:
    """Runs a sweep's stages on simulated workers."""
    keeps_models = False

    def __init__(self, loss: Any = None, *, step_s: float = 0.01,
                 start_s: float = 0.5) -> None:
        self.loss = loss if loss is not None else SyntheticLoss()
        self.step_s, self.start_s = float(step_s), float(start_s)

    def seconds_per_step(self, width: int) -> float:
        """Simulated seconds of one step at ``width``."""
        return self.step_s * (width / 16) ** 2

    @contextlib.contextmanager
    def cluster(self, ray_cfg: RayConfig) -> Iterator[dict[str, float] | None]:
        """No cluster: the config's ``ray.num_cpus`` CPUs (None: the ledger reads them)."""
        yield None

    def run_groups(self, specs: list[GroupSpec], settings: RunSettings,
                   follow_up: Any = None) -> dict[str, RunOutcome]:
        """Run the groups on the simulated workers; group → outcome (joined groups' too).

        Raises:
            SearchError: no group, or a group the driver refuses."""
        from mutune.search.backends.joining import settle

        if not specs:
            raise SearchError("run_groups needs at least one group")
        live, out = settle(specs, follow_up)
        if not live:
            return out
        return _SimRun(self, live, settings, follow_up).run(out)

    def run_target(self, spec: GroupSpec, settings: RunSettings,
                   num_workers: int) -> RunOutcome:
        """The target as one group whose trial holds ``num_workers`` workers' devices."""
        sim = _SimRun(self, [spec], settings, None, workers=num_workers)
        return sim.run({})[spec.group]


class _SimBook:
    """What a run's trials are, as the Ray book holds them: for the joiner, the budget and
    the outcomes (``trials`` by key, ``groups``, ``kinds``, ``devices`` …)."""

    def __init__(self, settings: RunSettings, live: list[GroupSpec], devices: float,
                 driver: Any = None) -> None:
        first = live[0]
        self.kind, self.width, self.devices = settings.kind, first.width, devices
        self.driver = driver
        self.trials: dict[str, TrialRecord] = {}
        self.resumed = {k: r for s in live if s.resume for k, r in s.resume.records.items()}
        self.groups = {s.group: (s.width, s.proxy_sweep_id, s.on_progress) for s in live}
        self.kinds = {s.group: s.kind for s in live if s.kind is not None}

    def group_of(self, key: str) -> str | None:
        t = self.driver.trials.get(key) if self.driver is not None else None
        return t.group if t is not None else None

    def next_milestone(self, rec: TrialRecord) -> int:
        core = self.driver.group_of(rec.key).core
        return (self.driver.group_of(rec.key).max_t if core is None
                else core.next_milestone(rec.key, rec.last_step))


class _SimRun:
    """One simulated run: the driver, the book, the event heap and the recorder calls."""

    def __init__(self, backend: SimulatedBackend, live: list[GroupSpec],
                 settings: RunSettings, follow_up: Any, workers: int = 1) -> None:
        from mutune.scaling.idle import held_devices
        from mutune.search.budget import BudgetAdmission

        self.backend, self.live, self.s = backend, live, settings
        ray_cfg = settings.ray_cfg
        s0 = settings
        self.cores = {sp.group: sp.core if sp.core is not None or s0.scheduler is None
                      or sp.kind not in (None, s0.kind)
                      else make_core(s0.scheduler, mode=s0.mode, seed=s0.scheduler_seed)
                      for sp in live}
        self.built = {sp.group: driver_group(sp, self.cores[sp.group], s0.max_t) for sp in live}
        per_trial = ray_cfg.gpus_per_trial or ray_cfg.cpus_per_trial
        self.book = _SimBook(settings, live, per_trial * workers)
        core0 = next((c for c in self.cores.values() if c is not None), None)
        admission = (BudgetAdmission(s0.budget, self.book, core0.grace_period)
                     if s0.budget is not None and core0 is not None else None)
        slots = held_devices({"CPU": float(ray_cfg.num_cpus)},
                             cpus_per_trial=ray_cfg.cpus_per_trial,
                             gpus_per_trial=0.0, max_concurrent=ray_cfg.max_concurrent_trials,
                             num_cpus=ray_cfg.num_cpus).slots
        self.driver = SweepDriver(
            [self.built[sp.group][0] for sp in live], concurrency=max(slots // workers, 1),
            metric=s0.metric, admission=admission,
            resume={sp.group: [(str(p["key"]), {**p, **sp.tags()}) for p in sp.resume.points]
                    for sp in live if sp.resume} or None)
        self.book.driver = self.driver
        if s0.budget is not None:
            s0.budget.register(self.book)
        self.joiner = None
        if follow_up is not None:
            from mutune.search.backends.joining import Joiner

            task = s0.task
            shipped = set(task) if isinstance(task, dict) else set()
            shipped.update(sp.task_name for sp in live if sp.task is not None)
            self.joiner = Joiner(self.driver, self.book, follow_up, self.cores, self.built,
                                 s0.max_t, specs={sp.group: sp for sp in live},
                                 shipped=shipped)
            for sp in live:
                self.joiner.watch(sp.group)
        self.every = int(getattr(getattr(settings.task, "train", None), "eval_every", 1) or 1)
        self.heap: list[tuple[float, int, str, int]] = []
        self.order = 0
        self.now = 0.0
        self.stopped: str | None = None

    # -- the event loop --------------------------------------------------------------------
    def run(self, out: dict[str, RunOutcome]) -> dict[str, RunOutcome]:
        control = self.s.controller
        self.stopped = control.stop_requested(self.s.sweep_id) if control else None
        if self.stopped is None:
            self._fill()
        while self.heap and self.stopped is None:
            self.now, _, key, step = heapq.heappop(self.heap)
            self._report(key, step)
            self.stopped = control.stop_requested(self.s.sweep_id) if control else None
        if self.stopped is not None:
            self._cancel(self.stopped)
        return self._outcomes(out)

    def _fill(self) -> None:
        while True:
            act = self.driver.next_action()
            if act.kind is ActionKind.PROMOTE:
                rec = self.book.trials[act.key]
                rec.resumes += 1
                self._decided(rec, act.judgement)
                self._save(act.key)
                self._schedule(act.key)
            elif act.kind is ActionKind.START:
                self._start(act.key, act.point)
            else:
                if act.kind is ActionKind.DONE:
                    for j in act.finished:
                        rec = self.book.trials[j.trial]
                        self._decided(rec, j)
                        self._finish(rec, *(self.driver.status(j.trial) or ("stopped", None)))
                return

    def _start(self, key: str, point: dict[str, Any]) -> None:
        s = self.s
        old = self.book.resumed.pop(key, None)
        if old is not None:          # a trial of an interrupted sweep continues
            old.status, old.restarts = "running", old.restarts + 1
            s.recorder.trial_resumed(old.trial_id, old.reason or "resumed")
            rec = old
        else:
            group = self.driver.trials[key].group
            width, ps_id, _ = self.book.groups[group]
            rid = s.recorder.trial_started(s.sweep_id, ps_id, self.book.kinds.get(group, s.kind),
                                           key, width, point["hparams"], int(point["seed"]))
            rec = TrialRecord(key, rid, point, self.now)
        rec.held_s += self.backend.start_s
        self.book.trials[key] = rec
        if s.on_started is not None:
            s.on_started(rec.trial_id)
        self._progress(key)
        self._schedule(key, self.backend.start_s)

    def _schedule(self, key: str, delay: float = 0.0) -> None:
        rec = self.book.trials[key]
        group = self.driver.group_of(key)
        pos = rec.last_step
        stops = [x for x in group.decision_steps() if x > pos]
        nxt = min([(pos // self.every + 1) * self.every, *stops, self.s.max_t])
        dt = delay + (nxt - pos) * self.backend.seconds_per_step(self._width(key))
        rec.held_s += dt - delay
        self.order += 1
        heapq.heappush(self.heap, (self.now + dt, self.order, key, nxt))

    def _width(self, key: str) -> int:
        return int(self.book.groups[self.driver.trials[key].group][0])

    def _report(self, key: str, step: int) -> None:
        rec, s = self.book.trials[key], self.s
        point = rec.point
        metrics = self.backend.loss(self._width(key), point["hparams"], int(point["seed"]),
                                    step)
        spent = step * self.backend.seconds_per_step(self._width(key))
        metrics.update(productive_s=spent, eval_s=0.0, samples=float(step),
                       n_params=float(self._width(key) ** 2))
        rec.reports.append({"step": step, **metrics})
        s.recorder.trial_reported(rec.trial_id, step, metrics, next(s.seq))
        value = metrics.get(s.metric, math.nan)
        out = self.driver.report(key, step, value, metrics.get(f"{s.metric}_se"))
        for j in out.judgements:
            self._decided(rec, j)
        if out.judgements:
            self._save(key)
        if out.action == "continue":
            self._schedule(key)
            return
        if out.action == "end":
            self._finish(rec, out.status or "completed", out.reason)
        self._fill()             # the trial paused or ended: its worker is free

    # -- what is recorded ------------------------------------------------------------------
    def _decided(self, rec: TrialRecord, j: Judgement) -> None:
        self.s.recorder.scheduler_decided(rec.trial_id, j.milestone, j.value, j.cutoff,
                                          j.decision.value, next(self.s.seq))

    def _save(self, key: str) -> None:
        group = self.driver.trials[key].group
        g, ps_id = self.driver.groups[group], self.book.groups[group][1]
        if g.core is not None and ps_id is not None:
            self.s.recorder.scheduler_saved(ps_id, g.core.state_dict(), g.searcher.state_dict(),
                                            next(self.s.seq))

    def _finish(self, rec: TrialRecord, status: str, reason: str | None) -> None:
        if rec.status != "running":
            return
        last = rec.reports[-1] if rec.reports else {}
        productive = float(last.get("productive_s", 0.0))
        rec.status, rec.reason, rec.ended = status, reason, self.now
        rec.timing = {"allocated_s": rec.held_s, "productive_s": productive, "eval_s": 0.0,
                      "overhead_s": max(rec.held_s - productive, 0.0),
                      "steps": rec.last_step, "samples": float(last.get("samples", 0.0)),
                      "evals": rec.n_evals, "n_params": float(last.get("n_params", 0.0)),
                      "devices": self.book.devices,
                      "device_kind": self.s.ray_cfg.priced_kind or "cpu",
                      "restarts": rec.restarts, "resumes": rec.resumes, "preemptions": 0,
                      "repeated_steps": 0, "recovery_s": 0.0, "checkpoint_s": 0.0,
                      "upload_s": 0.0, "setup_s": 0.0, "start_s": self.backend.start_s,
                      "checkpoint_bytes": 0.0}
        self.s.recorder.trial_finished(rec.trial_id, status, reason, rec.timing)
        self._progress(rec.key)

    def _cancel(self, reason: str) -> None:
        for key, rec in self.book.trials.items():
            if rec.status == "running":
                self.driver.ended(key, "cancelled", reason)
                self._finish(rec, "cancelled", reason)

    def _progress(self, key: str) -> None:
        group = self.driver.trials[key].group
        cb = self.book.groups[group][2]
        if cb is not None:
            mine = [r for r in self.book.trials.values()
                    if self.driver.trials[r.key].group == group]
            cb(sum(r.status != "running" for r in mine), len(mine))

    def _outcomes(self, out: dict[str, RunOutcome]) -> dict[str, RunOutcome]:
        joined = self.joiner.joined if self.joiner is not None else []
        for sp in [*self.live, *joined]:
            mine = [r for r in self.book.trials.values()
                    if self.driver.trials[r.key].group == sp.group]
            out[sp.group] = RunOutcome(finished_trials(sp) + mine, self.cores[sp.group],
                                       self.built[sp.group][1], self.stopped, self.driver)
        if self.joiner is not None:
            out.update(self.joiner.settled)
        return out
