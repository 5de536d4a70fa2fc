"""A user's own training loop (train.loop, entry-point group mutune.loops): registered through
real entry points (a ``*.dist-info`` folder on sys.path), trained by mutune's runner with the
μP model and optimizer, reporting Tune-style, checkpointed and resumed bit for bit, preempted
by SIGTERM, and refused clearly when it breaks the contract. Tiny MLP on digits, no Ray (the
example package runs under Ray end to end in tests/proxies/test_plugins.py)."""
from __future__ import annotations

import math
import signal
import sys
import textwrap

import pytest

from mutune.config import parse_config
from mutune.errors import SearchError
from mutune.proxies.task import ProxyTask, load_task_data
from mutune.search.trial.checkpoint import load_trial_state
from mutune.training import run_loop
from tests.conftest import config_error

LOOPS = textwrap.dedent('''
    """A user's loops: a plain AdamW loop with its own loss and warmup, and broken ones."""
    import os
    import signal

    import torch
    import torch.nn.functional as F

    SEEN = {}


    def plain(ctx):
        # torch's AdamW (mutune's subclass of it without the torch._dynamo import)
        SEEN["optimizer"] = isinstance(ctx.optimizer, torch.optim.AdamW)
        SEEN["start_step"] = ctx.start_step
        SEEN["resumed"] = ctx.get_checkpoint()
        state = (SEEN["resumed"] or {}).get("state") or {"updates": 0}
        updates = int(state["updates"])
        for step in ctx.steps():
            ctx.set_lr_factor(min(1.0, step / 4))             # the user's own warmup
            x, y = ctx.batch(step)
            loss = F.cross_entropy(ctx.net(x), y, label_smoothing=0.05)
            loss.backward()
            ctx.optimizer.step()
            ctx.optimizer.zero_grad(set_to_none=True)
            updates += 1
            if step == int(os.environ.get("LOOP_TEST_SIGTERM_AT", "0")):
                os.kill(os.getpid(), signal.SIGTERM)
            if ctx.is_eval_step(step):
                val, se = ctx.evaluate("val")
                ctx.report({"step": step, "val_loss": val, "val_loss_se": se,
                            "train_loss": loss.item(), "updates": updates},
                           state={"updates": updates})


    def accuracy(ctx):
        """A score of the loop's own: validation accuracy, ranked with mode max."""
        x_val = torch.as_tensor(ctx.data.val_x)
        y_val = torch.as_tensor(ctx.data.val_y)
        for step in ctx.steps():
            x, y = ctx.batch(step)
            F.cross_entropy(ctx.net(x), y).backward()
            ctx.optimizer.step()
            ctx.optimizer.zero_grad(set_to_none=True)
            if ctx.is_eval_step(step):
                with torch.no_grad():
                    acc = float((ctx.model(x_val).argmax(1) == y_val).float().mean())
                val, se = ctx.evaluate("val")
                ctx.report({"step": step, "val_accuracy": acc, "val_loss": val,
                            "val_loss_se": se})


    def skips_a_report(ctx):
        for step in ctx.steps():
            if step == 6:
                ctx.report({"step": step, "val_loss": 1.0})


    def no_metric(ctx):
        for step in ctx.steps():
            if ctx.is_eval_step(step):
                ctx.report({"step": step, "accuracy": 0.5})


    def stops_early(ctx):
        for step in ctx.steps():
            if ctx.is_eval_step(step):
                ctx.report({"step": step, "val_loss": 1.0})
            if step == 3:
                return


    def diverges(ctx):
        for step in ctx.steps():
            if ctx.is_eval_step(step):
                ctx.report({"step": step, "val_loss": float("nan") if step == 6 else 1.0})


    def swallows(ctx):
        """A user's broad except must not keep a diverged run going."""
        for step in ctx.steps():
            if ctx.is_eval_step(step):
                try:
                    ctx.report({"step": step, "val_loss": float("nan")})
                except Exception:
                    pass
''')


@pytest.fixture
def user_loops(tmp_path, monkeypatch):
    """A folder on sys.path holding the module ``user_loops`` and a distribution whose entry
    points register each of its loops in ``mutune.loops`` (plus a non-callable one)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "user_loops.py").write_text(LOOPS)
    dist = site / "user_loops-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: user-loops\nVersion: 1.0\n")
    names = ["plain", "accuracy", "skips_a_report", "no_metric", "stops_early", "diverges",
             "swallows"]
    (dist / "entry_points.txt").write_text(
        "[mutune.loops]\n" + "".join(f"{n} = user_loops:{n}\n" for n in names)
        + "not_callable = user_loops:SEEN\n")
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop("user_loops", None)


def _task(tiny_config, loop, **train):
    d = tiny_config.model_dump(mode="json")
    d["train"].update(loop=loop, **train)
    cfg = parse_config(d)
    return ProxyTask(cfg.model, cfg.train, load_task_data(cfg)).with_base_shapes()


def _config(max_t=12, **extra):
    return {"width": 32, "max_t": max_t, "threads": 1, "gpus": 0,
            "point": {"hparams": {"lr": 0.01}, "seed": 7, "index": 0}, **extra}


def _run(task, config, **kw):
    out = []
    status = run_loop(config, task, report=lambda m, folder: out.append(
        {**m, "folder": folder}), **kw)
    return status, out


def test_loop_plugin_is_found_by_name_and_unknown_names_are_refused(tiny_config, user_loops):
    import user_loops as mod

    task = _task(tiny_config, "plain")
    assert task.loop is mod.plain
    d = tiny_config.model_dump(mode="json")
    d["train"]["loop"] = "my_loop"
    with config_error("train.loop", "'my_loop'", "no training-loop plugin"):
        parse_config(d)
    with config_error("train.loop", rule="installed: accuracy, diverges, no_metric, "
                      "not_callable, plain"):
        parse_config(d)
    d["train"]["loop"] = "not_callable"
    with config_error("train.loop", "'not_callable'", "not a function loop"):
        parse_config(d)
    d["train"]["loop"] = "plain"
    d["search"]["replicates"] = 2
    with config_error("search.replicates", "2", "with train.loop 'plain'"):
        parse_config(d)


def test_user_loop_trains_the_mup_model_and_reports_what_mutune_adds(tiny_config, user_loops):
    import user_loops as mod

    task = _task(tiny_config, "plain")
    status, reports = _run(task, _config(max_t=12, checkpoint_at=[6]))
    assert status == "completed"
    assert [r["step"] for r in reports] == [3, 6, 9, 12]
    assert mod.SEEN["optimizer"] is True and mod.SEEN["resumed"] is None
    assert [r["updates"] for r in reports] == [3, 6, 9, 12]      # the loop's own keys kept
    first, last = reports[0], reports[-1]
    assert last["val_loss"] < first["val_loss"]                  # it learns
    assert last["samples"] == 12 * tiny_config.train.batch_size
    assert 0 < last["productive_s"] < last["wall_s"] and last["eval_s"] > 0
    assert last["n_params"] > 0 and last["restored_step"] == 0
    # mutune checkpointed the rung milestone (6): model, optimizer and the loop's state
    folders = [r["folder"] for r in reports if r["folder"] is not None]
    assert [f.name for f in folders] == ["step_000000006"]
    state = load_trial_state(folders[0])
    assert state["step"] == 6 and state["loop_state"] == {"updates": 6}


def test_a_plugins_scratch_checkpoints_are_removed_once_reported(tiny_config, user_loops,
                                                                  tmp_path):
    """Under Ray the report hands each checkpoint folder over (Ray copies it before the report
    returns): a plugin's folders, like mutune's loop's, exist while reported and are removed
    after; the cadence counts every checkpoint written."""
    task = _task(tiny_config, "plain")
    seen = []

    def report(metrics, folder):
        seen.append((metrics["step"], metrics["checkpoints"], folder,
                     folder is not None and (folder / "trial_state.pt").is_file()))

    root = tmp_path / "checkpoints"
    status = run_loop(_config(max_t=12, checkpoint_every=6), task, report=report,
                      checkpoint_root=root, scratch_checkpoints=True)
    assert status == "completed"
    written = [(step, n, here) for step, n, folder, here in seen if folder is not None]
    assert written == [(6, 1.0, True)]                 # max_t is not checkpointed (no target)
    assert [n for _, n, _, _ in seen] == [0.0, 1.0, 1.0, 1.0]
    assert sorted(p.name for p in root.iterdir()) == []   # removed once Ray held its copy


def test_user_loop_set_lr_factor_keeps_every_mup_groups_ratio(tiny_config, user_loops):
    """mup's groups start at different lrs (hidden and readout matrices: lr ÷ width
    multiplier); the user's warmup scales each by the same factor, never sets one value."""
    from mutune.training.context import LoopContext
    from mutune.training.session import TrialSession
    from mutune.training.spec import TrialSpec

    task = _task(tiny_config, "plain")
    session = TrialSession(TrialSpec.from_config(_config(max_t=4) | {"width": 64}), task)
    session.restore(None)
    opt = session.optimizers[0]
    start = sorted({g["lr"] for g in opt.param_groups})
    assert len(start) > 1                        # width 64 over base 16: distinct group lrs
    ctx = LoopContext(session, report=lambda m, f: None, notice=lambda: False)
    ctx.set_lr_factor(0.25)
    assert sorted({g["lr"] for g in opt.param_groups}) == pytest.approx(
        [v * 0.25 for v in start])
    with pytest.raises(ValueError, match="lr factor nan"):
        ctx.set_lr_factor(math.nan)


def test_user_loop_resumes_from_its_checkpoint_bit_for_bit(tiny_config, user_loops, tmp_path):
    import user_loops as mod

    task = _task(tiny_config, "plain")
    _, whole = _run(task, _config(max_t=12))
    _, first = _run(task, _config(max_t=12, checkpoint_every=6),
                    checkpoint_root=tmp_path / "ck")
    ckpt = next(r["folder"] for r in first if r["step"] == 6)
    status, rest = _run(task, _config(max_t=12), restore_dir=ckpt)
    assert status == "completed"
    assert mod.SEEN["start_step"] == 6
    assert mod.SEEN["resumed"] == {"step": 6, "state": {"updates": 6}}
    assert [r["step"] for r in rest] == [9, 12] and rest[0]["restored_step"] == 6
    assert [r["updates"] for r in rest] == [9, 12]
    assert [r["val_loss"] for r in rest] == [r["val_loss"] for r in whole[2:]]
    assert rest[-1]["samples"] == whole[-1]["samples"]


def test_sigterm_ends_a_user_loop_with_a_checkpoint_at_the_step_reached(
        tiny_config, user_loops, tmp_path, monkeypatch):
    monkeypatch.setenv("LOOP_TEST_SIGTERM_AT", "5")
    handler = signal.getsignal(signal.SIGTERM)
    task = _task(tiny_config, "plain")
    status, reports = _run(task, _config(max_t=12), checkpoint_root=tmp_path / "ck")
    assert status == "preempted"
    assert [r["step"] for r in reports] == [3, 5]           # stopped after the step in flight
    assert reports[-1]["folder"].name == "step_000000005"
    assert math.isfinite(reports[-1]["val_loss"])           # mutune's own evaluation
    monkeypatch.delenv("LOOP_TEST_SIGTERM_AT")
    status, rest = _run(task, _config(max_t=12), restore_dir=reports[-1]["folder"])
    assert status == "completed" and [r["step"] for r in rest] == [6, 9, 12]
    assert signal.getsignal(signal.SIGTERM) == handler          # the old handler is back


@pytest.mark.parametrize("loop, match", [
    ("skips_a_report", r"reported step 6; the next report is due at step 3"),
    ("no_metric", r"the sweep's metric 'val_loss' \(search.metric\) is missing"),
    ("stops_early", r"returned after step 3 was reported; a run ends at max_t = 12"),
])
def test_user_loop_contract_breaks_are_errors_that_name_the_rule(
        tiny_config, user_loops, loop, match):
    with pytest.raises(SearchError, match=match):
        _run(_task(tiny_config, loop), _config(max_t=12))


@pytest.mark.parametrize("loop", ["diverges", "swallows"])
def test_a_non_finite_metric_ends_a_user_loop_as_diverged(tiny_config, user_loops, loop):
    status, reports = _run(_task(tiny_config, loop), _config(max_t=12))
    assert status == "diverged"
    assert [r["step"] for r in reports] == ([3, 6] if loop == "diverges" else [3])


def test_user_loop_refuses_lockstep_replicates(tiny_config, user_loops):
    cfg = _config()
    cfg["point"]["replicate_seeds"] = [1, 2]
    with pytest.raises(SearchError, match="trains one model per trial; this trial asks for 2"):
        _run(_task(tiny_config, "plain"), cfg)


def test_dry_run_times_the_users_own_loop(tiny_config, user_loops):
    from mutune.pipeline.warmup import warmup

    task = _task(tiny_config, "plain")
    m = warmup(task, 32, {"lr": 0.01}, 4, 1)
    assert m["s_per_step"] > 0 and m["s_per_eval"] > 0 and m["setup_s"] > 0
    assert m["warmup_s"] >= m["setup_s"] + 4 * m["s_per_step"]


def test_the_warm_up_times_the_trials_own_run_step_by_step(tiny_config):
    """mutune's loop and a plugin are timed by the same run: one time per step trained, the
    median of steps 2… priced (the first one's allocation left out)."""
    import statistics

    from mutune.pipeline.warmup import warmup

    task = ProxyTask(tiny_config.model, tiny_config.train,
                     load_task_data(tiny_config)).with_base_shapes()
    times = []
    reports = []
    assert run_loop(_config(max_t=5), task, report=lambda m, f: reports.append(m),
                    step_times=times) == "completed"
    assert len(times) == 5 and all(t > 0 for t in times)
    assert sum(times) <= reports[-1]["productive_s"] + 1e-9
    m = warmup(task, 32, {"lr": 0.01}, 5, 1)
    assert m["s_per_step"] > 0 and m["s_per_eval"] > 0 and m["setup_s"] > 0
    assert m["warmup_s"] >= m["setup_s"] + 4 * m["s_per_step"]
    assert statistics.median(times[1:]) > 0


def test_metric_kinds_are_checked_and_a_loss_metric_needs_no_loop(tiny_config, user_loops):
    d = tiny_config.model_dump(mode="json")
    d["search"].update(metric="val_accuracy", mode="max")
    with config_error("search.metric_kind", "None", "say whether 'val_accuracy' is"):
        parse_config(d)
    d["search"]["metric_kind"] = "score"
    with config_error("search.metric", "'val_accuracy'", "mutune's own loop reports val_loss"):
        parse_config(d)
    d["train"]["loop"] = "accuracy"
    assert parse_config(d).search.kind_of_metric == "score"
    d["search"]["mode"] = "min"
    with config_error("search.mode", "'min'", "so mode must be 'max'"):
        parse_config(d)
    d["search"].update(metric="val_loss", metric_kind="score", mode="max")
    with config_error("search.metric_kind", "'score'", "metric 'val_loss' is a loss"):
        parse_config(d)


@pytest.mark.slow
def test_a_sweep_ranked_by_a_score_the_loop_reports(ray_local, tiny_config, user_loops,
                                                     tmp_path):
    """The whole main job on Ray ranked by the loop's val_accuracy (mode max): rungs and
    optima use it, the loss law and the target's watch say they were skipped, and the
    report carries the target's accuracy beside its validation loss."""
    import user_loops as mod
    from ray import cloudpickle

    import mutune

    # Ray's workers started before this test's sys.path entry: ship the module by value
    # (an installed plugin package is imported by name, as tests/proxies/test_plugins.py runs it)
    cloudpickle.register_pickle_by_value(mod)
    try:
        d = tiny_config.model_dump(mode="json")
        d["search"].update(metric="val_accuracy", metric_kind="score", mode="max")
        d["train"]["loop"] = "accuracy"
        d["transfer"]["confirm_replicates"] = 0
        result = mutune.run(parse_config(d), db=f"sqlite:///{tmp_path / 'score.db'}",
                            out_dir=tmp_path / "out",
                            progress=False)
    finally:
        cloudpickle.unregister_pickle_by_value(mod)
    rep = result.report
    assert rep["status"] == "completed"
    from mutune.services.store import Store

    with Store.open(f"sqlite:///{tmp_path / 'score.db'}") as store:
        trials = store.sweep_rows(result.sweep_id)["trials"]
    for p in rep["proxies"]:     # each width's best is the highest accuracy at its rung
        at_rung = [r["metrics"]["val_accuracy"] for t in trials if t["kind"] == "proxy"
                   and t["width"] == p["width"] for r in t["reports"]
                   if r["step"] == p["chosen_rung"]]
        assert len(at_rung) >= 3 and p["best_val_loss"] == pytest.approx(max(at_rung))
    tg = rep["target"]
    assert tg["metric"] == "val_accuracy" and 0.5 < tg["metric_value"] <= 1.0
    assert math.isfinite(tg["val_loss"])
    assert "is a score" in tg["watch"]["skipped"]
    assert "skipped" in tg["predicted_val_loss_error"]


def _ddp_worker(rank: int, world: int, init: str, task, config, out: str) -> None:
    """One data-parallel worker of the user loop (gloo on CPU), as Ray Train's run it."""
    import json

    import torch.distributed as dist

    from mutune.search.backends.ray_train import DataParallel

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        reports = []
        status = run_loop(config, task, report=lambda m, f: reports.append(m),
                              parallel=DataParallel(rank, world))
        with open(f"{out}.{rank}", "w") as fh:
            json.dump({"status": status, "val": [r["val_loss"] for r in reports],
                       "updates": [r["updates"] for r in reports]}, fh)
        # Ray Train tears the group down only once every worker's function has returned; a
        # worker destroying it while its peer is still in the last collective made gloo
        # abort the peer ("terminate called without an active exception", 1 run in 3)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def test_user_loop_on_two_ddp_workers_ends_where_one_process_does(tiny_config, user_loops,
                                                                   tmp_path):
    """The same loop on 2 gloo workers, each stepping on its half of every batch through the
    DDP wrapper (``ctx.net``) with gradients averaged, ends where one process on the whole
    batch does, and every worker reports the leading worker's evaluation."""
    import json

    import torch.multiprocessing as mp

    task = _task(tiny_config, "plain")
    cfg = _config(max_t=9)
    _, alone = _run(task, cfg)
    out = str(tmp_path / "ddp")
    mp.start_processes(_ddp_worker, args=(2, f"file://{tmp_path / 'rdzv'}", task, cfg, out),
                       nprocs=2, join=True, start_method="spawn")
    got = [json.loads(open(f"{out}.{r}").read()) for r in (0, 1)]
    assert got[0] == got[1] and got[0]["status"] == "completed"
    assert got[0]["updates"] == [3, 6, 9]
    expect = [r["val_loss"] for r in alone]
    assert got[0]["val"] == pytest.approx(expect, rel=1e-4)
