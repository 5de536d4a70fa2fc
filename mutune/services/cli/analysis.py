"""``mutune replay / export / coord-check / transfer-check``: what a recorded sweep says under
other settings, using it elsewhere, and the μP pre-flight checks.

``replay`` and ``export`` only read the results database (never create one);
``transfer-check`` records its runs as a sweep.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer

from mutune.services.cli.app import (DbOption, app, echo_json, fail, make_console, open_store,
                                     parse_widths)

__all__ = ["replay", "export", "coord_check_cmd", "transfer_check_cmd", "middle_lr"]


@app.command()
def replay(sweep_id: int = typer.Argument(..., help="Sweep id in the results database."),
           db: Optional[str] = DbOption,
           width: Optional[int] = typer.Option(None, help="Only this proxy width."),
           scheduler: Optional[str] = typer.Option(None, help="asha or hyperband."),
           grace_period: Optional[int] = typer.Option(None, help="r, in steps."),
           reduction_factor: Optional[int] = typer.Option(None, help="η."),
           max_t: Optional[int] = typer.Option(None, help="Largest budget, steps."),
           concurrency: Optional[int] = typer.Option(None, help="Simulated workers."),
           seed: Optional[int] = typer.Option(None, help="Seed (Hyperband brackets)."),
           as_json: bool = typer.Option(False, "--json", help="Print the result as JSON on "
                                        "stdout instead of the table."),
           json_out: Optional[Path] = typer.Option(None, "--json-out",
                                                   help="Also write the result here.")) -> None:
    """Re-simulate a scheduler on a sweep's recorded learning curves (trains nothing)."""
    import json

    from mutune._json import json_safe
    from mutune.errors import MutuneError
    from mutune.services.stored_replay import ReplayChanges, render_replay, replay_sweep

    try:
        changes = ReplayChanges(scheduler=scheduler, grace_period=grace_period,
                                reduction_factor=reduction_factor, max_t=max_t,
                                concurrency=concurrency, seed=seed)
        with open_store(db) as store:
            result = replay_sweep(store, sweep_id, width=width, changes=changes)
    except MutuneError as err:
        fail(err)
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(json_safe(result), indent=2, default=str) + "\n",
                            encoding="utf-8")
    if as_json:
        echo_json(result)
    else:
        render_replay(result, make_console())


@app.command()
def export(sweep_id: int = typer.Argument(..., help="Sweep id in the results database."),
           db: Optional[str] = DbOption,
           hparams: bool = typer.Option(False, "--hparams",
                                        help="Write the transferred hyperparameters for "
                                             "--width (and --depth)."),
           width: Optional[int] = typer.Option(None, min=1, help="Target width (--hparams)."),
           depth: Optional[int] = typer.Option(None, min=1,
                                               help="Target depth (--hparams; default: the "
                                                    "sweep's)."),
           fmt: str = typer.Option("json", "--format", help="json or yaml (--hparams)."),
           out: Optional[Path] = typer.Option(None, "--out",
                                              help="Write here instead of stdout (--hparams)."),
           optuna_storage: Optional[str] = typer.Option(
               None, help="Optuna RDB storage URL, e.g. sqlite:///optuna.db."),
           study_prefix: str = typer.Option("mutune", help="Study names: PREFIX-ID-wWIDTH."),
           overwrite: bool = typer.Option(False, help="Replace studies of the same name."),
           model: Optional[Path] = typer.Option(
               None, "--model", help="Copy the trained target model (weights, optimizer "
                                     "state, base shapes, config) here, with load_model.py.")
           ) -> None:
    """Use a sweep elsewhere: ``--hparams --width N`` writes the transferred hyperparameters
    for that shape (rule, interval, verdict, μP optimizer snippet); ``--optuna-storage URL``
    writes the sweep into an Optuna storage (one study per proxy width) for optuna-dashboard;
    ``--model DIR`` copies the trained target model with a snippet that loads it."""
    from mutune.errors import MutuneError

    if sum((hparams, optuna_storage is not None, model is not None)) != 1:
        fail(ValueError("give exactly one of --hparams (with --width), --optuna-storage or "
                        "--model DIR"))
    if model is not None:
        from mutune.services.export.model import export_model
        try:
            with open_store(db) as store:
                dest = export_model(store.sweep_rows(sweep_id), model)
        except MutuneError as err:
            fail(err)
        typer.echo(f"wrote {dest} (load it with the Python mutune is installed in: "
                   f"{sys.executable} {dest / 'load_model.py'})")
        return
    if hparams and width is None:
        fail(ValueError("--hparams needs --width N (the target width)"))
    if fmt not in ("json", "yaml"):
        fail(ValueError(f"--format {fmt!r}: use json or yaml"))
    try:
        with open_store(db) as store:
            if hparams:
                from mutune.services.export.hparams import export_hparams, format_export
                text = format_export(export_hparams(store.sweep_rows(sweep_id), width=width,
                                                    depth=depth), fmt)
            else:
                from mutune.services.export.optuna import export_to_optuna
                names = export_to_optuna(store, sweep_id, optuna_storage,
                                         study_prefix=study_prefix, overwrite=overwrite)
    except MutuneError as err:
        fail(err)
    if not hparams:
        for name in names:
            typer.echo(f"study {name} → {optuna_storage}")
    elif out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {out}")
    else:
        typer.echo(text, nl=False)


def _num(v: Any) -> str:
    """``v`` with two decimals, or ``n/a`` (None: an interval no bootstrap replicate fixed)."""
    return "n/a" if v is None or v != v else f"{v:.2f}"


def middle_lr(cfg: Any) -> float:
    """The geometric middle of ``cfg.search.space["lr"]`` (arithmetic when its low is ≤ 0; the
    middle listed value of a choice)."""
    import math
    dist = cfg.search.space["lr"]
    if hasattr(dist, "low"):
        return math.sqrt(dist.low * dist.high) if dist.low > 0 else (dist.low + dist.high) / 2
    return sorted(dist.values)[len(dist.values) // 2]


@app.command("coord-check")
def coord_check_cmd(
        config: Optional[Path] = typer.Argument(None, help="Sweep config (default: quickstart)."),
        widths: str = typer.Option("64,128,256,512,1024", help="Comma-separated widths."),
        lr: Optional[float] = typer.Option(None, help="Learning rate (default: the geometric "
                                                      "middle of the config's lr range)."),
        steps: int = typer.Option(3, help="Optimizer steps before the activations are read."),
        seeds: int = typer.Option(3, help="Seeds averaged."),
        axis: str = typer.Option("width", help="width (μP against SP) or depth (CompleteP, "
                                               "Depth-μP and none, at --width)."),
        depths: str = typer.Option("2,4,8", help="Comma-separated depths (--axis depth)."),
        width: Optional[int] = typer.Option(None, min=1, help="The width of --axis depth "
                                            "(default: the config's smallest proxy width)."),
        out: Path = typer.Option(Path("mutune-out"), "--out", help="Output folder.")) -> None:
    """Activation size per module against width (μP and SP) or depth (each depth
    parametrization): coord_check.json and a PNG."""
    from rich.table import Table

    from mutune.services.report.formatting import unclipped

    from mutune.config import load_config
    from mutune.errors import MutuneError
    from mutune.pipeline.preflight import run_coord_check

    if axis not in ("width", "depth"):
        fail(ValueError(f"--axis {axis!r}: use width or depth"))
    try:
        cfg = load_config(config)
        rate = lr if lr is not None else middle_lr(cfg)
        if axis == "depth":
            from mutune.pipeline.depth_check import run_depth_coord_check
            table = run_depth_coord_check(cfg, width=width or min(cfg.widths),
                                          depths=parse_widths(depths), lr=rate, steps=steps,
                                          seeds=tuple(range(seeds)), out_dir=out)
        else:
            table = run_coord_check(cfg, widths=parse_widths(widths), lr=rate, steps=steps,
                                    seeds=tuple(range(seeds)), out_dir=out)
    except MutuneError as err:
        fail(err)
    pars = [k for k in table if isinstance(table[k], dict) and "slopes" in table[k]]
    t = Table(title=f"coord check: slope of log mean|output| vs log {axis} (lr {rate:.3g}, "
                    f"after {steps} steps)")
    t.add_column("module")
    for par in pars:
        t.add_column({"mup": "μP", "sp": "SP"}.get(par, par), justify="right")
    for name in table[pars[0]]["slopes"]:
        t.add_row(name, *(f"{table[p]['slopes'][name]:.3f} "
                          f"[{_num(table[p]['slope_intervals'][name][0])}, "
                          f"{_num(table[p]['slope_intervals'][name][1])}]" for p in pars))
    make_console().print(unclipped(t))
    typer.echo("slope [95 % interval over seeds]: a module grows with the "
               f"{axis} when its interval lies above 0.1")
    typer.echo(f"wrote {out / 'coord_check.json'} and {out / 'coord_check.png'}")


@app.command("transfer-check")
def transfer_check_cmd(
        config: Optional[Path] = typer.Argument(None, help="Sweep config (default: quickstart)."),
        widths: str = typer.Option("64,128,256,512,1024", help="Comma-separated widths."),
        log2_lr_min: float = typer.Option(-12.0, help="Smallest log2 learning rate."),
        log2_lr_max: float = typer.Option(-2.0, help="Largest log2 learning rate."),
        num_lrs: int = typer.Option(11, help="Grid points between them."),
        seeds: int = typer.Option(6, help="Replicate seeds per point (trained in one trial)."),
        steps: int = typer.Option(60, help="Training steps per run."),
        axis: str = typer.Option("width", help="width (μP beside SP) or depth (CompleteP, "
                                               "Depth-μP and none at --width; one trial per "
                                               "seed, optima with bootstrap intervals)."),
        depths: str = typer.Option("2,4,8", help="Comma-separated depths (--axis depth)."),
        width: Optional[int] = typer.Option(None, min=1, help="The width of --axis depth "
                                            "(default: the config's smallest proxy width)."),
        db: Optional[str] = DbOption,
        out: Path = typer.Option(Path("mutune-out"), "--out", help="Output folder.")) -> None:
    """Loss against log2 LR per width (μP beside SP) or per depth (each depth
    parametrization): Ray Tune trials, recorded as a sweep; transfer_check.json and a PNG."""
    import numpy as np

    from mutune.config import load_config
    from mutune.errors import MutuneError
    from mutune.pipeline.preflight import run_transfer_check

    if axis not in ("width", "depth"):
        fail(ValueError(f"--axis {axis!r}: use width or depth"))
    try:
        cfg = load_config(config)
        grid = np.linspace(log2_lr_min, log2_lr_max, num_lrs).tolist()
        if axis == "depth":       # a bad setting fails before a database is created
            from mutune.pipeline.depth_check import depth_configs
            depth_configs(cfg, parse_widths(depths))
        with open_store(db, create=True) as store:
            if axis == "depth":
                from mutune.pipeline.depth_transfer import DepthGrid, run_depth_transfer_check
                res = run_depth_transfer_check(
                    cfg, store, width=width or min(cfg.widths), out_dir=out,
                    grid=DepthGrid(parse_widths(depths), grid, seeds=seeds, steps=steps))
            else:
                res = run_transfer_check(cfg, store, widths=parse_widths(widths),
                                         log2_lrs=grid, seeds=seeds, steps=steps, out_dir=out)
    except MutuneError as err:
        fail(err)
    if axis == "depth":
        typer.echo(f"width {res['width']}, base depth {res['depths'][0]} (the smallest: every "
                   "parametrization builds the same model there, trained once); spread = max − "
                   "min of the optima, drift = deepest − shallowest, depth slope = octaves of "
                   "lr per octave of depth (stable: its interval inside ±0.1); [95 % "
                   f"intervals over {res['seeds']} seeds]")
        for par in ("completep", "depth_mup", "none"):
            e = res[par]
            opt = ", ".join(f"{d}: {v:.2f} [{_num(lo)}, {_num(hi)}]" for (d, v), (lo, hi)
                            in zip(e["optimum_log2_lr"].items(),
                                   e["optimum_log2_lr_interval"].values()))
            typer.echo(f"{par}: optimum log2 lr per depth {{{opt}}}; spread "
                       f"{e['spread_octaves']:.2f}, drift {e['drift_octaves']:.2f} octaves; "
                       f"depth slope {e['slope']:+.3f} {e['rule']['verdicts']['depth']}")
        typer.echo(f"wrote {out / 'transfer_check.json'} and {out / 'transfer_check.png'}")
        return
    for par, key in (("mup", "spread_octaves"), ("sp", "drift_octaves")):
        opt = ", ".join(f"{w}: {v:.2f}" for w, v in res[par]["optimum_log2_lr"].items())
        typer.echo(f"{par}: optimum log2 lr per width {{{opt}}}; {key} = {res[par][key]:.2f}")
    typer.echo(f"wrote {out / 'transfer_check.json'} and {out / 'transfer_check.png'}")
