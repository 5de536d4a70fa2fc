"""The ``mutune`` command line (typer). Every command that touches results takes ``--db URL``
(default ``sqlite:///mutune.db``, env ``MUTUNE_DB``)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="μP hyperparameter transfer: sweep small proxies, transfer, "
                       "train once at full size, count the GPU-hours saved.")
db_app = typer.Typer(no_args_is_help=True, help="Results database maintenance.")
app.add_typer(db_app, name="db")

DbOption = typer.Option(None, "--db", envvar="MUTUNE_DB",
                        help="Results database URL (default sqlite:///mutune.db).")


def _fail(err: Exception) -> None:
    from rich.console import Console
    Console(stderr=True).print(f"[red]error:[/] {err}", markup=True, highlight=False)
    raise typer.Exit(code=2)


@app.command()
def run(config: Optional[Path] = typer.Argument(
            None, help="Sweep config YAML; omitted: the quickstart config shipped with "
                       "mutune (configs/quickstart.yaml)."),
        db: Optional[str] = DbOption,
        out: Path = typer.Option(Path("mutune-out"), "--out",
                                 help="Folder for report.json, plots and Ray state.")) -> None:
    """Run the main job: proxy sweeps on Ray Tune → transfer rules → one target run → report."""
    from rich.console import Console

    from mutune.api import run as api_run
    from mutune.errors import ConfigError

    console = Console()
    try:
        api_run(config, db=db, out_dir=out, console=console)
    except ConfigError as err:
        _fail(err)


@app.command()
def report(sweep_id: int = typer.Argument(..., help="Sweep id in the results database."),
           db: Optional[str] = DbOption,
           json_out: Optional[Path] = typer.Option(None, "--json",
                                                   help="Also write report.json here.")) -> None:
    """Print a sweep's report again from the database alone (the main job's renderer)."""
    from rich.console import Console

    from mutune.api import resolve_db
    from mutune.errors import StoreError
    from mutune.services.report import build_report, render_report, write_report_json
    from mutune.services.store import Store

    try:
        with Store.open(resolve_db(db)) as store:
            rows = store.sweep_rows(sweep_id)
    except StoreError as err:
        _fail(err)
    rep = build_report(rows)
    render_report(rep, Console())
    if json_out:
        write_report_json(rep, json_out)


@app.command()
def rerun(sweep_id: int = typer.Argument(..., help="Sweep id in the results database."),
          db: Optional[str] = DbOption,
          out: Path = typer.Option(Path("mutune-out"), "--out",
                                   help="Folder for report.json, plots and Ray state.")) -> None:
    """Re-execute a stored sweep with the same config and seeds; warns where the recorded
    provenance (package versions, hardware, dataset fingerprint) differs."""
    from rich.console import Console

    from mutune.api import rerun as api_rerun
    from mutune.errors import ConfigError, StoreError

    try:
        api_rerun(sweep_id, db=db, out_dir=out, console=Console())
    except (ConfigError, StoreError) as err:
        _fail(err)


@app.command()
def resume(sweep_id: int = typer.Argument(..., help="Sweep id in the results database."),
           db: Optional[str] = DbOption,
           out: Path = typer.Option(Path("mutune-out"), "--out",
                                    help="Folder for report.json, plots and Ray state.")) -> None:
    """Finish an interrupted sweep: stale trials (heartbeat older than ray.lease_s) retry from
    their checkpoints, the scheduler continues from its saved state, exactly num_samples
    trials per width in total."""
    from rich.console import Console

    from mutune.api import resume as api_resume
    from mutune.errors import MutuneError

    try:
        api_resume(sweep_id, db=db, out_dir=out, console=Console())
    except MutuneError as err:
        _fail(err)


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
           json_out: Optional[Path] = typer.Option(None, "--json",
                                                   help="Also write the result here.")) -> None:
    """Re-simulate a scheduler on a sweep's recorded learning curves (trains nothing)."""
    import json

    from rich.console import Console

    from mutune.api import resolve_db
    from mutune.errors import MutuneError
    from mutune.services.replay_service import render_replay, replay_sweep
    from mutune.services.store import Store

    try:
        with Store.open(resolve_db(db)) as store:
            result = replay_sweep(store, sweep_id, width=width, scheduler=scheduler,
                                  grace_period=grace_period, reduction_factor=reduction_factor,
                                  max_t=max_t, concurrency=concurrency, seed=seed)
    except MutuneError as err:
        _fail(err)
    render_replay(result, Console())
    if json_out:
        json_out.write_text(json.dumps(result, indent=2, default=str) + "\n")


@app.command()
def export(sweep_id: int = typer.Argument(..., help="Sweep id in the results database."),
           db: Optional[str] = DbOption,
           optuna_storage: str = typer.Option(..., help="Optuna RDB storage URL, e.g. "
                                                        "sqlite:///optuna.db."),
           study_prefix: str = typer.Option("mutune", help="Study names: PREFIX-ID-wWIDTH."),
           overwrite: bool = typer.Option(False, help="Replace studies of the same name.")
           ) -> None:
    """Write a sweep into an Optuna storage (one study per proxy width) for optuna-dashboard."""
    from mutune.api import resolve_db
    from mutune.errors import MutuneError
    from mutune.services.optuna_export import export_to_optuna
    from mutune.services.store import Store

    try:
        with Store.open(resolve_db(db)) as store:
            names = export_to_optuna(store, sweep_id, optuna_storage,
                                     study_prefix=study_prefix, overwrite=overwrite)
    except MutuneError as err:
        _fail(err)
    for name in names:
        typer.echo(f"study {name} → {optuna_storage}")


def _widths(text: str) -> list[int]:
    try:
        return [int(w) for w in text.split(",") if w.strip()]
    except ValueError:
        raise typer.BadParameter(f"{text!r}: give comma-separated integers, e.g. 64,128,256")


@app.command("coord-check")
def coord_check_cmd(
        config: Optional[Path] = typer.Argument(None, help="Sweep config (default: quickstart)."),
        widths: str = typer.Option("64,128,256,512,1024", help="Comma-separated widths."),
        lr: Optional[float] = typer.Option(None, help="Learning rate (default: the geometric "
                                                      "middle of the config's lr range)."),
        steps: int = typer.Option(3, help="Optimizer steps before the activations are read."),
        seeds: int = typer.Option(3, help="Seeds averaged."),
        out: Path = typer.Option(Path("mutune-out"), "--out", help="Output folder.")) -> None:
    """Activation size per module against width, μP and SP: coord_check.json and a PNG."""
    from rich.console import Console
    from rich.table import Table

    from mutune.checks import run_coord_check
    from mutune.config import load_config
    from mutune.errors import MutuneError

    try:
        cfg = load_config(config)
        rate = lr if lr is not None else _middle_lr(cfg)
        table = run_coord_check(cfg, widths=_widths(widths), lr=rate, steps=steps,
                                seeds=tuple(range(seeds)), out_dir=out)
    except MutuneError as err:
        _fail(err)
    t = Table(title=f"coord check: slope of log mean|output| vs log width (lr {rate:.3g}, "
                    f"after {steps} steps)")
    t.add_column("module")
    t.add_column("μP", justify="right")
    t.add_column("SP", justify="right")
    for name, v in table["mup"]["slopes"].items():
        t.add_row(name, f"{v:.3f}", f"{table['sp']['slopes'][name]:.3f}")
    Console().print(t)
    typer.echo(f"wrote {out / 'coord_check.json'} and {out / 'coord_check.png'}")


def _middle_lr(cfg) -> float:
    import math
    dist = cfg.search.space["lr"]
    if hasattr(dist, "low"):
        return math.sqrt(dist.low * dist.high) if dist.low > 0 else (dist.low + dist.high) / 2
    return sorted(dist.values)[len(dist.values) // 2]


@app.command("transfer-check")
def transfer_check_cmd(
        config: Optional[Path] = typer.Argument(None, help="Sweep config (default: quickstart)."),
        widths: str = typer.Option("64,128,256,512,1024", help="Comma-separated widths."),
        log2_lr_min: float = typer.Option(-12.0, help="Smallest log2 learning rate."),
        log2_lr_max: float = typer.Option(-2.0, help="Largest log2 learning rate."),
        num_lrs: int = typer.Option(11, help="Grid points between them."),
        seeds: int = typer.Option(6, help="Replicate seeds per point (trained in one trial)."),
        steps: int = typer.Option(60, help="Training steps per run."),
        db: Optional[str] = DbOption,
        out: Path = typer.Option(Path("mutune-out"), "--out", help="Output folder.")) -> None:
    """Loss against log2 LR per width, μP beside SP (Ray Tune trials, recorded as a sweep)."""
    import numpy as np

    from mutune.api import resolve_db
    from mutune.checks import run_transfer_check
    from mutune.config import load_config
    from mutune.errors import MutuneError
    from mutune.services.store import Store

    try:
        cfg = load_config(config)
        grid = np.linspace(log2_lr_min, log2_lr_max, num_lrs).tolist()
        with Store.open(resolve_db(db)) as store:
            res = run_transfer_check(cfg, store, widths=_widths(widths), log2_lrs=grid,
                                     seeds=seeds, steps=steps, out_dir=out)
    except MutuneError as err:
        _fail(err)
    for par, key in (("mup", "spread_octaves"), ("sp", "drift_octaves")):
        opt = ", ".join(f"{w}: {v:.2f}" for w, v in res[par]["optimum_log2_lr"].items())
        typer.echo(f"{par}: optimum log2 lr per width {{{opt}}}; {key} = {res[par][key]:.2f}")
    typer.echo(f"wrote {out / 'transfer_check.json'} and {out / 'transfer_check.png'}")


@db_app.command("upgrade")
def db_upgrade(db: Optional[str] = DbOption) -> None:
    """Create or upgrade the results database schema to the latest migration (idempotent)."""
    from mutune.api import resolve_db
    from mutune.services.store import upgrade

    url = resolve_db(db)
    upgrade(url)
    typer.echo(f"database at head: {url}")


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
