"""Every proxy width in one Ray Tune run (slow: real Ray, SQLite store, tiny MLP).

Each width keeps its own scheduler core, searcher and proxy sweep row while its trials share
the run's slots: at concurrency 1 the widths swept together end exactly as each width swept
alone (same trials, reports bit for bit, same decisions); at concurrency 2 a width's trials
start while another width's are still running (no width waits for another's tail).
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from mutune.pipeline import open_sweep
from mutune.pipeline.proxy_stage import run_widths, sweep_width, sweep_widths
from mutune.pipeline.stage_groups import StageGroups
from mutune.search.backends.ray_tune.searcher_adapter import RaySearcher
from mutune.search.schedulers.factory import scheduler_from_state
from mutune.services.store import Store

pytestmark = pytest.mark.slow


def _config(tiny_config, concurrency):
    d = tiny_config.model_dump(mode="json")
    d["ray"].update(max_concurrent_trials=concurrency)
    return type(tiny_config).model_validate(d)


def _per_width(rows):
    """width → (trials: [(key, hparams, seed, status, [(step, val_loss)])], decisions:
    [(key, milestone, decision, value, cutoff)]) from a sweep's rows."""
    ps_width = {p["id"]: p["width"] for p in rows["proxy_sweeps"]}
    by_id = {t["id"]: t for t in rows["trials"]}
    out = {}
    for w in sorted(set(ps_width.values())):
        trials = sorted((t["key"], t["config"], t["seed"], t["status"],
                         [(r["step"], r["metrics"]["val_loss"]) for r in t["reports"]])
                        for t in rows["trials"] if ps_width[t["proxy_sweep_id"]] == w
                        and t["kind"] == "proxy")
        decisions = [(by_id[e["trial_id"]]["key"], e["milestone"], e["decision"], e["value"],
                      e["cutoff"]) for e in sorted(rows["events"], key=lambda e: e["seq"])
                     if ps_width[by_id[e["trial_id"]]["proxy_sweep_id"]] == w]
        out[w] = (trials, decisions)
    return out


def _designs(rows):
    """key → (hparams, seed, status, [(step, val_loss)]) of every confirmation trial."""
    return {t["key"]: (t["config"], t["seed"], t["status"],
                       [(r["step"], r["metrics"]["val_loss"]) for r in t["reports"]])
            for t in rows["trials"] if t["kind"] == "confirm"}


def _sweep(cfg, tmp_path, name, together):
    """The widths swept in one run with their designs (``together``), or one by one and their
    designs after them in a run of their own (as a resumed sweep whose widths had completed)."""
    with Store.open(f"sqlite:///{tmp_path / name}.db") as store:
        with open_sweep(cfg, store, out_dir=tmp_path / name) as run:
            if together:
                stages = sweep_widths(run, list(cfg.widths))
            else:
                stages = StageGroups(run, [(w, None) for w in cfg.widths])
                for i, w in enumerate(cfg.widths):
                    stages.rebuilt(*sweep_width(run, w, i))
                run_widths(run, [], stages=stages)
        return stages, store.sweep_rows(run.sweep_id)


def test_widths_swept_together_end_as_each_swept_alone(ray_local, tiny_config, tmp_path):
    cfg = _config(tiny_config, 1)
    stages_alone, rows_alone = _sweep(cfg, tmp_path, "alone", together=False)
    stages, rows = _sweep(cfg, tmp_path, "together", together=True)
    alone, together = stages_alone.screened(), stages.screened()
    confirmed, confirmed_alone = stages.final(), stages_alone.final()
    # each width's design joined the proxy run when the width was done (the same driver),
    # and trained the same trials bit for bit as the designs run after the widths swept one
    # by one
    for p, o in together:
        assert stages.states[p.size].designs[0].driver is o.driver
    assert _designs(rows) == _designs(rows_alone) and len(_designs(rows)) == 2 * 9
    for (p, _), (q, _) in zip(confirmed, confirmed_alone):
        assert (p.best_config, p.best_val_loss, p.optimum.optimum) == (
            q.best_config, q.best_val_loss, q.optimum.optimum)
    # a design starts once its width is done (every proxy trial of that width reported
    # its last) and goes ahead of the next width's new trials
    seqs = {t["key"]: [r["seq"] for r in t["reports"]] for t in rows["trials"]}
    wide = max(cfg.widths)
    assert min(s[0] for k, s in seqs.items() if k.startswith(f"c0w{wide}-")) > max(
        s[-1] for k, s in seqs.items() if k.startswith(f"w{wide}-"))
    want, got = _per_width(rows_alone), _per_width(rows)
    assert sorted(got) == list(cfg.widths)
    for w in cfg.widths:
        assert len(got[w][0]) == cfg.search.num_samples
        assert got[w] == want[w]            # same trials, reports and decisions per width
    for (p, o), (q, _) in zip(together, alone):
        assert (p.width, p.best_config, p.best_val_loss, p.milestone) == (
            q.width, q.best_config, q.best_val_loss, q.milestone)
        # each width's core judged its own trials only
        assert {k for vals in o.core.rung_values().values() for k in vals} <= {
            t.key for t in o.trials}
        assert all(t.key.startswith(f"w{p.width}-") for t in o.trials)
    # each proxy sweep row saved its own width's scheduler state
    for ps in rows["proxy_sweeps"]:
        core = scheduler_from_state(ps["scheduler_state"])
        keys = {k for vals in core.rung_values().values() for k in vals}
        assert keys and all(k.startswith(f"w{ps['width']}-") for k in keys)
    # the widest width is issued first: its trials report before the narrower width's
    first = {w: min(r["seq"] for t in rows["trials"] for r in t["reports"]
                    if t["key"].startswith(f"w{w}-")) for w in cfg.widths}
    assert first[max(cfg.widths)] < first[min(cfg.widths)]


def test_a_width_starts_while_another_width_still_runs(ray_local, tiny_config, tmp_path,
                                                       monkeypatch):
    # when the driver handed each trial to Ray (driver clock; the real suggest runs):
    # Ray calls on_trial_start only once a kept actor was reset, and a width's last trial
    # may end in that gap, so the trial's start is not what shows the slot was shared
    issued: dict[str, float] = {}
    suggest = RaySearcher.suggest

    def spy(self, trial_id):
        got = suggest(self, trial_id)
        if isinstance(got, dict):
            issued.setdefault(got["point"]["key"], time.monotonic())
        return got

    monkeypatch.setattr(RaySearcher, "suggest", spy)
    cfg = _config(tiny_config, 2)
    stages, rows = _sweep(cfg, tmp_path, "overlap", together=True)
    together = stages.screened()
    # every width's design joined the proxy run (its trials lie in that run's experiment,
    # no run of their own); when it starts against the other widths is timing here (the
    # driver's order is tested in tests/search/driver/test_driver.py)
    designs = [t for t in rows["trials"] if t["key"].startswith("c0w")]
    assert len(designs) == 9 * len(cfg.widths) and {t["kind"] for t in designs} == {"confirm"}
    experiments = {Path(t["checkpoint_dir"]).parent.name for t in rows["trials"]}
    assert len(experiments) == 1 and all(t["status"] == "completed" for t in designs)
    assert [p.width for p, _ in together] == list(cfg.widths)
    trials = {p.width: o.trials for p, o in together}
    wide, narrow = max(cfg.widths), min(cfg.widths)
    # the driver issued the narrow width's first trial before the wide width's last one
    # ended: the slot a wide trial freed went to the narrow width, not to the wide width's
    # tail (Ray asks for a trial at the top of each controller step, before it handles the
    # step's one event, so a free slot is offered before the next trial can end)
    assert min(issued[t.key] for t in trials[narrow]) < max(t.ended for t in trials[wide])
    assert sum(len(o.trials) for _, o in together) == cfg.search.num_samples * len(cfg.widths)
    # Tune kept both slots' actors between trials even while no trial waited (a width's
    # end, before its design joined; mutune.search.backends.ray_tune.actor_keep): the
    # design that joined last trained on both at once, and no actor was started anew
    def pids(trials):
        return {r["metrics"]["worker_pid"] for t in trials for r in t["reports"]}
    last = max(narrow, wide, key=lambda w: min(t["started_at"] for t in designs
                                               if t["key"].startswith(f"c0w{w}-")))
    assert pids(t for t in designs if t["key"].startswith(f"c0w{last}-")) \
        == pids(rows["trials"]) and len(pids(rows["trials"])) == 2
