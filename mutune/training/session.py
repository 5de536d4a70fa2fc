"""One trial's training state: models, optimizers, schedules, checkpoints and the ledger's clocks.
"""
from __future__ import annotations

import math
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mutune.training.spec import TrialSpec

__all__ = ["TrialSession", "LEDGER_KEYS"]

#: the figures every report carries besides the loop's own (docs/architecture.md §6)
LEDGER_KEYS = ("productive_s", "eval_s", "setup_s", "samples", "n_params", "replicates",
               "restored_step", "restore_s", "wall_s", "checkpoint_s", "checkpoints",
               "checkpoint_bytes")


class TrialSession:
    """The models, optimizers, schedules and checkpoints of one trial.

    Raises:
        ProxyError: the model cannot be built."""

    def __init__(self, spec: TrialSpec, task: Any, *, parallel: Any = None,
                 checkpoint_root: str | Path | None = None,
                 scratch_checkpoints: bool = False) -> None:
        import torch

        from mutune.proxies.device import select_device

        torch.set_num_threads(spec.threads)
        self.spec = spec
        self.dev = select_device(prefer_cuda=spec.gpus > 0)
        self.t0 = time.perf_counter()
        self.hparams: dict[str, float] = dict(spec.point.hparams)
        self.task = task.for_point(self.hparams)    # the point's recipe knobs
        self.seeds = list(spec.point.seeds)
        self.width, self.max_t = spec.trial_width, spec.max_t
        self.keep_final = spec.keep_final               # the target: its model is kept
        self.marks, self.metric = spec.checkpoint_at, spec.metric
        self.test_at_end, self.limits = spec.test_at_max_t, spec.diverge_above
        self.parallel = parallel
        self.lead = parallel is None or parallel.lead
        self.models, self.optimizers, self.schedulers = self._build()
        # what the steps run: each model, or its data-parallel wrapper (the optimizer, the
        # evaluation and the checkpoints use the model itself: the same parameter tensors)
        self.nets = [parallel.wrap(m) for m in self.models] if parallel else list(self.models)
        self.n_params = sum(p.numel() for p in self.models[0].parameters())
        self.setup_s = time.perf_counter() - self.t0
        self.start_step, self.restore_s, self.checkpoint_s = 0, 0.0, 0.0
        self.prior_productive_s = self.prior_eval_s = 0.0
        self.checkpoint_bytes = 0
        self.restored: dict[str, Any] | None = None
        self._root = [Path(checkpoint_root)] if checkpoint_root else []
        self._scratch = scratch_checkpoints
        self._written_s = 0.0
        self.cadence: Any = None

    def _build(self) -> tuple[list[Any], list[Any], list[Any]]:
        import torch

        from mutune.training.schedule import make_lr_schedule

        models, opts = [], []
        for seed in self.seeds:
            gen = torch.Generator().manual_seed(seed)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
                models.append(self.task.build(self.width, self.hparams).to(self.dev.device))
            opts.append(self.task.optimizer(models[-1], float(self.hparams["lr"])))
        for opt in opts:             # set_lr_factor's reference, schedule or not
            _keep_initial_lr(opt)
        # the schedule scales every μP group's own starting lr (None: constant, no warmup)
        return models, opts, [make_lr_schedule(o, self.task.train, self.max_t) for o in opts]

    def restore(self, restore_dir: str | Path | None) -> None:
        """Load a checkpoint folder written by :meth:`save` (None: fresh start); set up the cadence.

        Raises:
            SearchError: an unreadable checkpoint."""
        import torch

        from mutune.search.trial.cadence import Cadence
        from mutune.search.trial.checkpoint import load_trial_state

        if restore_dir is not None:
            tr = time.perf_counter()
            state = load_trial_state(restore_dir)
            for model, opt, ms, os_ in zip(self.models, self.optimizers, state["models"],
                                           state["optimizers"]):
                model.load_state_dict(ms)
                opt.load_state_dict(os_)
                _keep_initial_lr(opt)
            saved = state.get("schedulers") or [None] * len(self.schedulers)
            for sched, ss in zip(self.schedulers, saved):
                if sched is not None and ss is not None:
                    sched.load_state_dict(ss)
            torch.set_rng_state(state["rng_cpu"])
            if self.dev.kind == "cuda" and state.get("rng_cuda") is not None:
                torch.cuda.set_rng_state(state["rng_cuda"])
            self.start_step = int(state["step"])
            self.prior_productive_s = float(state["productive_s"])
            self.prior_eval_s = float(state["eval_s"])
            # bytes written along the kept trajectory: those before this checkpoint, and it
            self.checkpoint_bytes = int(state.get("checkpoint_bytes", 0)) + sum(
                f.stat().st_size for f in Path(restore_dir).iterdir() if f.is_file())
            loop_state = state.get("loop_state")
            if "loop_state" not in state and "loss_sum" in state:  # mutune's, written before
                loop_state = {"loss_sum": state["loss_sum"], "loss_n": state["loss_n"]}
            self.restored = {"step": self.start_step, "state": loop_state}
            self.restore_s = time.perf_counter() - tr
        sp = self.spec
        # every N steps, or ``auto``: Young's interval from the measured checkpoint seconds
        self.cadence = Cadence(sp.checkpoint_every, start_step=self.start_step,
                               spot=dict(sp.spot) if sp.spot else None,
                               max_share=sp.checkpoint_max_share,
                               final_step=self.max_t if self.keep_final else None)

    def save(self, step: int, loop_state: Any, productive_s: float, eval_s: float) -> Path:
        """Write the trial's state at ``step`` (models, optimizers, RNG, clocks); its folder."""
        import torch

        from mutune.search.trial.checkpoint import save_trial_state

        tc = time.perf_counter()
        if not self._root:             # made on the first checkpoint only
            self._root.append(Path(tempfile.mkdtemp(prefix="mutune-ckpt-")))
        folder = self._root[0] / f"step_{step:09d}"
        written = save_trial_state(folder, {
            "step": step, "models": [m.state_dict() for m in self.models],
            "optimizers": [o.state_dict() for o in self.optimizers],
            "schedulers": [None if s is None else s.state_dict() for s in self.schedulers],
            "rng_cpu": torch.get_rng_state(),
            "rng_cuda": torch.cuda.get_rng_state() if self.dev.kind == "cuda" else None,
            "productive_s": productive_s, "eval_s": eval_s,
            "checkpoint_bytes": self.checkpoint_bytes, "loop_state": loop_state},
            durable=not self._scratch)
        self._written_s = time.perf_counter() - tc
        self.checkpoint_s += self._written_s
        self.checkpoint_bytes += written.stat().st_size
        return folder

    def checkpoint_due(self, step: int, *, diverged: bool, stop_now: bool) -> bool:
        """Whether the report at ``step`` carries a checkpoint (final, notice, cadence, rung)."""
        if diverged:
            return False
        if step == self.max_t:
            return self.keep_final
        return (stop_now or self.cadence.due(step)
                or any(self.cadence.last_step < m <= step for m in self.marks))

    def diverged(self, metrics: dict[str, Any], *, stop_now: bool) -> bool:
        """Whether ``metrics`` are non-finite or beyond the divergence limit by > 3 standard
        errors."""
        from mutune.search.driver.types import beyond_limit

        metric = self.metric if self.metric in metrics else "val_loss"
        value = metrics["val_loss"] if stop_now else metrics[metric]
        if not (isinstance(value, (int, float)) and math.isfinite(float(value))):
            return True
        step, se = metrics["step"], metrics.get(f"{metric}_se")
        limit = self.limits.get(step)
        return limit is not None and beyond_limit(
            float(metrics[metric]), float(se) if isinstance(se, (int, float)) else None, limit)

    def emit(self, metrics: dict[str, Any], loop_state: Any, report: Any, *,
             productive_s: float, eval_s: float, stop_now: bool = False) -> str | None:
        """Add ledger figures, write the checkpoint due, ``report``; the ending status or None."""
        step = int(metrics["step"])
        diverged = self.diverged(metrics, stop_now=stop_now)
        folder = None
        if self.checkpoint_due(step, diverged=diverged, stop_now=stop_now):
            folder = self.save(step, loop_state, productive_s, eval_s) if self.lead else None
            self.cadence.last_step = step       # every worker (only the lead writes)
        metrics.update({
            "productive_s": productive_s, "eval_s": eval_s, "setup_s": self.setup_s,
            "samples": step * self.task.samples_per_step * len(self.seeds),
            "n_params": self.n_params, "replicates": len(self.seeds),
            "restored_step": self.start_step, "restore_s": self.restore_s,
            "wall_s": time.perf_counter() - self.t0, "checkpoint_s": self.checkpoint_s,
            "checkpoints": float(self.cadence.n + (folder is not None)),
            "checkpoint_bytes": float(self.checkpoint_bytes)})
        tr = time.perf_counter()
        report(metrics, folder)
        if folder is not None:
            # the cadence weighs what the checkpoint held the devices for: the write and the
            # report that hands it to Ray (which copies it into its storage first)
            self.cadence.wrote(step, self._written_s + time.perf_counter() - tr)
            if self._scratch:     # Ray holds its copy now
                shutil.rmtree(folder, ignore_errors=True)
        if diverged:
            return "diverged"
        if stop_now and step < self.max_t:
            return "preempted"
        if self.parallel is not None and step < self.max_t and self.parallel.stop_requested():
            return "cancelled"
        return None


def _keep_initial_lr(opt: Any) -> None:
    for group in opt.param_groups:
        group.setdefault("initial_lr", group["lr"])
