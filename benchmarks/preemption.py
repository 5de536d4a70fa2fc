"""Preemption benchmark: an MLP-example-sized sweep whose seeded schedule preempts ≥ 25 % of its
trials — graceful notices through the notice file, and hard kills (SIGKILL) — against the same
sweep uninterrupted (docs/architecture.md §4.6).

The sweep: the MLP example config's search (configs/mlp-digits.yaml: 32 samples, ASHA grace
20, η 3, max_t 200, an evaluation every 10 steps) at its widest proxy width, checkpoints every
``--checkpoint-every`` steps, ``ray.max_failures`` 3 (hard kills are failures), one trial at a
time (so "the same decisions" is defined: docs/architecture.md §4.2). The schedule (seeded)
picks ``--fraction`` of the trials; each is hit when it first reports at or past a step drawn
before its first evaluation (so the hit lands before its first rung, which every trial
reaches): a graceful notice (the notice file appears; the trial checkpoints the
step it reached and is retried from it) or, for ``--hard-fraction`` of them, SIGKILL of its
worker (retried from its last checkpoint). Prints one JSON object:

    {"benchmark": "preemption", "preemptions", "graceful", "hard",
     "lost_steps_graceful"         steps trained again after graceful notices (0 expected),
     "lost_steps_per_hard_kill"    mean steps trained again per hard kill (≤ the interval),
     "checkpoint_interval_steps",
     "recovery_s_per_preemption"   restart set-up + checkpoint load + retrained steps' seconds,
     "reports_lost"                reports of the uninterrupted sweep missing or different,
     "same_decisions"              the scheduler's decisions equal the uninterrupted sweep's,
     "ettr", "ettr_without_preemption"   sweep ETTR: productive / (wall × devices held),
     "trials", "seed", "wall_s", "wall_s_without_preemption"}

Run: ``python benchmarks/preemption.py --seed 0`` (about 3 minutes on 2 CPUs).
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import signal
import tempfile
import time
from pathlib import Path

import numpy as np


def sweep_config(samples: int, checkpoint_every: int, notice: Path):
    """The MLP example's search at its widest proxy width, one trial at a time."""
    from mutune.config import load_config, parse_config

    d = load_config("configs/mlp-digits.yaml").model_dump(mode="json")
    d["search"]["num_samples"] = samples
    d["train"]["checkpoint_every"] = checkpoint_every
    # each trial is hit at the first report the driver sees at or past its drawn step: every
    # report goes at once (none held back, mutune/search/trial/report_hold.py)
    d["ray"].update(max_concurrent_trials=1, max_failures=3, report_hold_s=0.0,
                    preemption={"notice_file": str(notice), "poll_s": 0.01})
    return parse_config(d)


class Schedule:
    """Seeded: which trial (by index) is hit, at which step, and how (``graceful``/``hard``).
    A Ray Tune callback acts on it (driver side) and removes the notice file when the next
    trial starts, so every graceful notice is a new one."""

    def __init__(self, n: int, seed: int, fraction: float, hard_fraction: float,
                 first_report: int, notice: Path) -> None:
        rng = np.random.default_rng(seed)
        hit = sorted(rng.choice(n, size=max(1, math.ceil(fraction * n)), replace=False))
        n_hard = int(round(hard_fraction * len(hit)))
        hard = set(rng.choice(hit, size=n_hard, replace=False).tolist()) if n_hard else set()
        self.plan = {int(i): (int(rng.integers(1, first_report)),
                              "hard" if i in hard else "graceful")
                     for i in hit}
        self.notice = str(notice)

    def callback(self):
        from ray.tune import Callback

        plan, notice, done = self.plan, self.notice, set()

        class Hit(Callback):
            def on_trial_start(self, iteration, trials, trial, **info):
                if os.path.exists(notice):
                    os.unlink(notice)

            def on_trial_result(self, iteration, trials, trial, result, **info):
                index = int(trial.config["point"]["index"])
                if index in done or index not in plan or result["step"] < plan[index][0]:
                    return
                done.add(index)
                if plan[index][1] == "hard":
                    os.kill(int(result["pid"]), signal.SIGKILL)
                else:
                    Path(notice).write_text("preempt")
        return Hit()


def run_sweep(cfg, task, storage: Path, name: str, callbacks=()):
    """One sweep of the config's search at its widest width; (outcome, recorder, wall_s)."""
    from mutune.pipeline.recording import MemoryRecorder
    from mutune.search.backends.base import CheckpointPolicy, RunSettings, run_group
    from mutune.search.backends.groups import GroupSpec
    from mutune.search.backends.ray_tune.backend import RayBackend
    from mutune.search.searchers import make_searcher
    from mutune.search.searchers.space import trial_seeds

    s = cfg.search
    rec = MemoryRecorder()
    t0 = time.perf_counter()
    width = max(cfg.widths)
    spec = GroupSpec(width, 1, f"w{width}", searcher=make_searcher(s, cfg.seed, 0),
                     seeds=trial_seeds(cfg.seed, 0, s.num_samples))
    out = run_group(RayBackend(), spec, RunSettings(
        task=task, max_t=s.scheduler.max_t, recorder=rec, sweep_id=1, ray_cfg=cfg.ray,
        storage=storage, name=name, seq=itertools.count(1), kind="proxy",
        scheduler=s.scheduler, callbacks=tuple(callbacks),
        checkpoints=CheckpointPolicy(every=cfg.train.checkpoint_every)))
    return out, rec, time.perf_counter() - t0


def _keyed(rec):
    key = {e["id"]: e["key"] for e in rec.of("trial_started")}
    reports = {(key[e["trial_id"]], e["step"]): e["metrics"]["val_loss"]
               for e in rec.of("trial_reported")}
    decisions = [(key[e["trial_id"]], e["milestone"], e["decision"])
                 for e in rec.of("scheduler_decided")]
    return reports, decisions


def _sweep_ettr(out, wall: float, devices: float) -> float:
    return sum(t.timing["productive_s"] for t in out.trials) / (wall * devices)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0, help="the preemption schedule's seed")
    p.add_argument("--samples", type=int, default=32, help="trials (the MLP example: 32)")
    p.add_argument("--fraction", type=float, default=0.3, help="share of trials hit")
    p.add_argument("--hard-fraction", type=float, default=0.3,
                   help="share of the hits that are SIGKILLs")
    p.add_argument("--checkpoint-every", type=int, default=20, help="steps")
    args = p.parse_args(argv)
    from mutune.proxies.task import ProxyTask, load_task_data
    from mutune.search.backends.ray_tune.cluster import ray_cluster

    with tempfile.TemporaryDirectory(prefix="mutune-preempt-") as tmp:
        notice = Path(tmp) / "notice"
        cfg = sweep_config(args.samples, args.checkpoint_every, notice)
        task = ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()
        sched = Schedule(args.samples, args.seed, args.fraction, args.hard_fraction,
                         cfg.train.eval_every, notice)
        with ray_cluster(cfg.ray):
            ref, ref_rec, ref_wall = run_sweep(cfg, task, Path(tmp) / "ref", "ref")
            out, rec, wall = run_sweep(cfg, task, Path(tmp) / "hit", "hit",
                                       callbacks=[sched.callback()])
    by_index = {int(t.point["index"]): t for t in out.trials}
    graceful = [by_index[i] for i, (_, how) in sched.plan.items() if how == "graceful"]
    hard = [by_index[i] for i, (_, how) in sched.plan.items() if how == "hard"]
    ref_reports, ref_decisions = _keyed(ref_rec)
    reports, decisions = _keyed(rec)
    lost = sum(1 for k, v in ref_reports.items() if reports.get(k) != v)
    preemptions = sum(t.timing.get("preemptions", 0) for t in out.trials)
    restarts = sum(t.timing.get("restarts", 0) for t in out.trials)
    recovery = sum(t.timing.get("recovery_s", 0.0) for t in out.trials)
    fig = {"benchmark": "preemption", "preemptions": preemptions + restarts,
           "graceful": preemptions, "hard": restarts,
           "lost_steps_graceful": sum(t.repeated_steps for t in graceful),
           "lost_steps_per_hard_kill": (sum(t.repeated_steps for t in hard) / restarts
                                        if restarts else None),
           "checkpoint_interval_steps": args.checkpoint_every,
           "recovery_s_per_preemption": (recovery / (preemptions + restarts)
                                         if preemptions + restarts else None),
           "reports_lost": lost, "same_decisions": decisions == ref_decisions,
           "ettr": _sweep_ettr(out, wall, cfg.ray.cpus_per_trial),
           "ettr_without_preemption": _sweep_ettr(ref, ref_wall, cfg.ray.cpus_per_trial),
           "trials": len(out.trials), "scheduled": len(sched.plan),
           "scheduled_hard": len(hard), "seed": args.seed, "wall_s": wall,
           "wall_s_without_preemption": ref_wall}
    print(json.dumps(fig), flush=True)
    return fig


if __name__ == "__main__":
    main()
