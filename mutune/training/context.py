"""What a training loop receives: :class:`LoopContext` (docs/architecture.md §5)."""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from mutune.errors import SearchError

if TYPE_CHECKING:
    from mutune.training.session import TrialSession

__all__ = ["LoopContext", "LoopEnd"]


class LoopEnd(BaseException):
    """Ends the loop from ``report``/``steps`` (a BaseException: ``except Exception`` misses it)."""

    def __init__(self, status: str) -> None:
        super().__init__(status)
        self.status = status


class LoopContext:
    """What a training loop receives (the contract: docs/architecture.md §5)."""

    def __init__(self, session: TrialSession, *, report: Callable[[dict[str, Any], Any], None],
                 notice: Callable[[], bool], name: str = "mutune",
                 plugin: bool = False) -> None:
        s = self._session = session
        self.models, self.nets, self.optimizers = s.models, s.nets, s.optimizers
        self.schedulers, self.seeds = s.schedulers, s.seeds
        self.model, self.net, self.optimizer = s.models[0], s.nets[0], s.optimizers[0]
        self.scheduler, self.seed = s.schedulers[0], s.seeds[0]
        self.hparams, self.train, self.data = dict(s.hparams), s.task.train, s.task.data
        self.width, self.max_t, self.start_step = s.width, s.max_t, s.start_step
        self.eval_every, self.device = int(s.task.train.eval_every), s.dev.device
        self._report, self._notice, self._name = report, notice, name
        self._plugin = plugin
        self.test_at_end = s.test_at_end
        self.batch_s = self.eval_s = self.held_s = 0.0
        self.last_step = self.last_report = int(s.start_step)
        self._asked = self._stopping = False
        self._last_value: Any = math.nan
        self.step_s: list[float] = []
        self._t0 = time.perf_counter()

    def steps(self) -> Iterator[int]:
        """Steps ``start_step + 1`` … ``max_t``; a preemption notice ends the run after a step
        (status
        ``preempted``) unless the loop asked :meth:`stop_requested` during it."""
        mark = (time.perf_counter(), 0.0)
        for step in range(self.start_step + 1, self.max_t + 1):
            if step > self.start_step + 1:
                self.step_s.append(self._productive_since(mark))
                if not self._asked and self._agreed_notice():
                    self._stop(step - 1)
            self._asked = False
            self.last_step = step
            mark = (time.perf_counter(), self.batch_s + self.eval_s + self.held_s)
            yield step
        if self.last_step > self.start_step:
            self.step_s.append(self._productive_since(mark))

    def _productive_since(self, mark: tuple[float, float]) -> float:
        t, other = mark
        return time.perf_counter() - t - (self.batch_s + self.eval_s + self.held_s - other)

    def _agreed_notice(self) -> bool:
        # under DDP every worker joins this all-reduce at every step (never short-circuited:
        # a worker that skipped it would leave the others waiting in the collective)
        par = self._session.parallel
        local = bool(self._notice())
        return local if par is None else bool(par.any(local)[0])

    def stop_requested(self, *flags: bool) -> tuple[bool, ...]:
        """``(stop, *flags)`` OR-ed over the Ray Train workers in one collective (call on all)."""
        self._asked = True
        stop = bool(self._notice())
        par = self._session.parallel
        out = (stop, *flags) if par is None else tuple(par.any(stop, *flags))
        self._stopping = bool(out[0])
        return out

    def is_eval_step(self, step: int) -> bool:
        """Whether ``step`` must be reported: a multiple of ``eval_every``, or ``max_t``."""
        return step % self.eval_every == 0 or step == self.max_t

    def batch(self, step: int, seed: int | None = None) -> tuple[Any, Any]:
        """Training batch ``step`` of the trial's (or replicate's) seed on ``device``; pure in
        (seed, step).

        Returns:
            (x, y): (batch, d_in) and (batch,) for digits; (batch, seq_len) token ids and targets.
        """
        t = time.perf_counter()
        s = self._session
        x, y = s.task.batch(self.seed if seed is None else seed, step)
        if s.parallel is not None:
            x, y = s.parallel.shard(x, y)
        x = x.to(self.device, non_blocking=True)
        y = y.to(self.device, non_blocking=True)
        self.batch_s += time.perf_counter() - t
        return x, y

    def step_loss(self, net: Any, x: Any, y: Any) -> Any:
        """The family's loss of ``net`` on (x, y) under the trial's numerics (a scalar tensor)."""
        s = self._session
        with s.dev.compute():
            return s.task.step_loss(net, x, y)

    def evaluate(self, split: str = "val") -> tuple[float, float]:
        """(mean cross-entropy in nats, standard error) of ``model`` on ``"val"`` or ``"test"``."""
        t = time.perf_counter()
        s = self._session
        value: tuple[float, float] = (math.nan, math.nan)
        if s.lead:
            with s.dev.compute():
                value = s.task.evaluate(self.model, split)
        if s.parallel is not None:
            value = s.parallel.share(value)
        self.eval_s += time.perf_counter() - t
        return value

    def evaluate_replicates(self, *, test: bool = False
                            ) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
        """Each replicate's (val loss, se), with ``test`` its (test loss, se), nats; call on all."""
        from mutune.training.evaluation import evaluate_models

        t = time.perf_counter()
        s = self._session
        got = evaluate_models(s.task, self.models, s.dev, s.parallel, test=test)
        self.eval_s += time.perf_counter() - t
        return got

    def has_split(self, split: str) -> bool:
        """Whether the data hold ``split`` (``"val"`` always; ``"test"`` when loaded)."""
        return bool(self._session.task.has_split(split))

    def set_lr_factor(self, factor: float) -> None:
        """Set each parameter group's lr to ``factor`` × its own ``initial_lr`` (μP ratios kept).

        Raises:
            ValueError: ``factor`` is not a finite number >= 0."""
        if not (math.isfinite(factor) and factor >= 0):
            raise ValueError(f"lr factor {factor!r}: must be a finite number >= 0")
        for opt in self.optimizers:
            for group in opt.param_groups:
                group["lr"] = group["initial_lr"] * factor

    def report(self, metrics: dict[str, Any], *, state: Any = None) -> None:
        """Report one evaluation: ``metrics`` holds the next evaluation ``step`` and
        ``search.metric``.

        Raises:
            SearchError: a missing or out-of-order ``step``, or a missing metric."""
        metrics = dict(metrics)
        step = metrics.get("step")
        due = min(self.last_report + self.eval_every - self.last_report % self.eval_every,
                  self.max_t)
        metric = self._session.metric
        value = metrics.get(metric)
        early = (step == self.last_step and isinstance(step, int) and (
            (self._stopping and metrics.get("preempted")) or metric in metrics
            and not (isinstance(value, (int, float)) and math.isfinite(float(value)))))
        if not isinstance(step, int) or isinstance(step, bool) or (step != due and not early):
            raise SearchError(
                f"train.loop = {self._name!r} reported step {step!r}; the next report is due "
                f"at step {due} (every multiple of train.eval_every = {self.eval_every} and "
                f"max_t = {self.max_t}, in order: the scheduler's rungs judge exactly the "
                "reported step) — report when ctx.is_eval_step(step)")
        if self._plugin and metric not in metrics and not early:
            raise SearchError(f"train.loop = {self._name!r} reported {sorted(metrics)} at "
                              f"step {step}: the sweep's metric {metric!r} (search.metric) "
                              "is missing")
        self._emit(metrics, state, stop_now=bool(metrics.get("preempted")))

    def get_checkpoint(self) -> dict[str, Any] | None:
        """``{"step", "state"}`` this run resumed from (model etc. already restored), or None."""
        restored = self._session.restored
        return None if restored is None else dict(restored)

    def productive_s(self) -> float:
        """The loop's own seconds so far (less batches, evaluations, reports and checkpoints)."""
        s = self._session
        return s.prior_productive_s + (time.perf_counter() - self._t0 - self.batch_s
                                       - self.eval_s - self.held_s)

    def _emit(self, metrics: dict[str, Any], state: Any, *, stop_now: bool) -> None:
        th = time.perf_counter()
        s = self._session
        own = sorted(k for k, v in metrics.items() if k != "step"
                     and isinstance(v, (int, float)) and not isinstance(v, bool))
        productive = self.productive_s()
        if self._plugin:
            metrics["loop_keys"] = own
        end = s.emit(metrics, state, self._report, productive_s=productive,
                     eval_s=s.prior_eval_s + self.eval_s, stop_now=stop_now)
        self.last_report = int(metrics["step"])
        self._last_value = metrics.get(s.metric, math.nan)
        self.held_s += time.perf_counter() - th
        if end is not None:
            raise LoopEnd(end)

    def _stop(self, step: int) -> None:
        """An unasked preemption notice: evaluate, checkpoint, report and end at ``step``."""
        val, se = self.evaluate("val")
        metric = self._session.metric
        # ``at_eval`` 0: a report only the preemption made (the evaluation step, if it was
        # one, was reported already)
        self._emit({"step": step, "val_loss": val, "val_loss_se": se, "preempted": 1.0,
                    "at_eval": 0.0, **({} if metric == "val_loss"
                                       else {metric: self._last_value})},
                   None, stop_now=True)
