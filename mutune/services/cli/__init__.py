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
token_app = typer.Typer(no_args_is_help=True, help="API tokens of the search server.")
app.add_typer(token_app, name="token")

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
                                 help="Folder for report.json, plots and Ray state."),
        dry_run: bool = typer.Option(False, "--dry-run",
                                     help="Print the planned trials, steps, GPU-hours and "
                                          "money (from a short warm-up of each width) and "
                                          "exit; trains and records nothing."),
        warmup_steps: int = typer.Option(5, min=2, help="Steps timed per width (--dry-run)."),
        trial_overhead_s: float = typer.Option(
            2.0, min=0, help="Assumed Ray start-up + teardown per trial, s (--dry-run)."),
        plan_json: Optional[Path] = typer.Option(None, "--plan-json",
                                                 help="Also write the plan here (--dry-run)."),
        ) -> None:
    """Run the main job: proxy sweeps on Ray Tune → transfer rules → one target run → report."""
    from rich.console import Console

    from mutune.services.api import run as api_run
    from mutune.errors import ConfigError, MutuneError

    console = Console()
    if dry_run:
        import json

        from mutune.config import load_config
        from mutune.pipeline.dry_run import plan_sweep, render_plan
        try:
            plan = plan_sweep(load_config(config), warmup_steps=warmup_steps,
                              overhead_s=trial_overhead_s)
        except MutuneError as err:
            _fail(err)
        render_plan(plan, console)
        if plan_json:
            from mutune._json import json_safe
            plan_json.write_text(json.dumps(json_safe(plan), indent=2) + "\n")
        return
    try:
        api_run(config, db=db, out_dir=out, console=console)
    except ConfigError as err:
        _fail(err)


@app.command()
def report(sweep_id: Optional[int] = typer.Argument(None, help="Sweep id in the results "
                                                      "database (omit with --by)."),
           db: Optional[str] = DbOption,
           by: Optional[str] = typer.Option(None, "--by", help="'project': sum the ledger "
                                            "of every sweep per project instead."),
           json_out: Optional[Path] = typer.Option(None, "--json",
                                                   help="Also write report.json here.")) -> None:
    """Print a sweep's report again from the database alone (the main job's renderer), or,
    with ``--by project``, GPU-hours and money summed per project across sweeps."""
    from rich.console import Console

    from mutune.services.api import resolve_db
    from mutune.errors import ConfigError, StoreError
    from mutune.services.report import (build_report, project_costs, render_project_costs,
                                        render_report, write_report_json)
    from mutune.services.store import Store

    if by is not None and by != "project":
        _fail(ConfigError(f"--by = {by!r}: the only grouping is 'project'"))
    if (by is None) == (sweep_id is None):
        _fail(ConfigError("give either a SWEEP_ID or --by project"))
    try:
        with Store.open(resolve_db(db)) as store:
            if by:
                rows = project_costs(store.list_sweeps(), store.sweep_costs())
            else:
                rows = store.sweep_rows(sweep_id)
    except StoreError as err:
        _fail(err)
    if by:
        render_project_costs(rows, Console())
        if json_out:
            write_report_json({"by": "project", "projects": rows}, json_out)
        return
    rep = build_report(rows)
    render_report(rep, Console())
    if json_out:
        write_report_json(rep, json_out)


@app.command("list")
def list_cmd(db: Optional[str] = DbOption,
             status: Optional[str] = typer.Option(None, help="Only sweeps with this status "
                                                             "(running, completed, failed, "
                                                             "cancelled, budget_exhausted)."),
             limit: int = typer.Option(50, min=1, help="At most this many, newest first."),
             json_out: bool = typer.Option(False, "--json", help="Print JSON instead.")
             ) -> None:
    """List the sweeps in the results database: status, widths, trials, GPU-hours."""
    import json

    from rich.console import Console

    from mutune.services.api import resolve_db
    from mutune.errors import StoreError
    from mutune.services.report.listing import render_sweep_list
    from mutune.services.store import Store

    try:
        with Store.open(resolve_db(db)) as store:
            sweeps = store.sweep_summaries(limit=limit, status=status)
    except StoreError as err:
        _fail(err)
    if json_out:
        typer.echo(json.dumps(sweeps, indent=2))
    else:
        render_sweep_list(sweeps, Console())


@app.command()
def show(sweep_id: int = typer.Argument(..., help="Sweep id in the results database."),
         db: Optional[str] = DbOption) -> None:
    """One sweep: status and reason, model, provenance, and every trial with its status."""
    from rich.console import Console

    from mutune.services.api import resolve_db
    from mutune.errors import StoreError
    from mutune.services.report.listing import render_sweep
    from mutune.services.store import Store

    try:
        with Store.open(resolve_db(db)) as store:
            rows = store.sweep_rows(sweep_id)
    except StoreError as err:
        _fail(err)
    render_sweep(rows, Console())


@app.command()
def cancel(sweep_id: int = typer.Argument(..., help="Sweep id in the results database."),
           db: Optional[str] = DbOption) -> None:
    """Cancel a running sweep: the process running it starts no new trial, stops the running
    ones, and records the sweep ``cancelled`` (within about a second of its next trial event)."""
    from mutune.services.api import resolve_db
    from mutune.errors import StoreError
    from mutune.services.store import Store

    try:
        with Store.open(resolve_db(db)) as store:
            store.request_cancel(sweep_id)
    except StoreError as err:
        _fail(err)
    typer.echo(f"sweep {sweep_id}: cancel requested; the running process stops it")


@app.command()
def logs(trial_id: int = typer.Argument(..., help="Trial id (see mutune show SWEEP_ID)."),
         db: Optional[str] = DbOption) -> None:
    """A trial's stdout, stderr and, if it failed, its traceback, as stored in the database."""
    from rich.console import Console

    from mutune.services.api import resolve_db
    from mutune.errors import StoreError
    from mutune.services.report.listing import render_trial_log
    from mutune.services.store import Store

    try:
        with Store.open(resolve_db(db)) as store:
            log = store.trial_log(trial_id)
    except StoreError as err:
        _fail(err)
    render_trial_log(log, Console())


@app.command()
def rerun(sweep_id: int = typer.Argument(..., help="Sweep id in the results database."),
          db: Optional[str] = DbOption,
          out: Path = typer.Option(Path("mutune-out"), "--out",
                                   help="Folder for report.json, plots and Ray state.")) -> None:
    """Re-execute a stored sweep with the same config and seeds; warns where the recorded
    provenance (package versions, hardware, dataset fingerprint) differs."""
    from rich.console import Console

    from mutune.services.api import rerun as api_rerun
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

    from mutune.services.api import resume as api_resume
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

    from mutune.services.api import resolve_db
    from mutune.errors import MutuneError
    from mutune.services.stored_replay import render_replay, replay_sweep
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
           overwrite: bool = typer.Option(False, help="Replace studies of the same name.")
           ) -> None:
    """Use a sweep elsewhere: ``--hparams --width N`` writes the transferred hyperparameters
    for that shape (rule, interval, verdict, μP optimizer snippet); ``--optuna-storage URL``
    writes the sweep into an Optuna storage (one study per proxy width) for optuna-dashboard."""
    from mutune.services.api import resolve_db
    from mutune.errors import MutuneError

    if hparams == (optuna_storage is not None):
        _fail(ValueError("give exactly one of --hparams (with --width) or --optuna-storage"))
    if hparams and width is None:
        _fail(ValueError("--hparams needs --width N (the target width)"))
    if fmt not in ("json", "yaml"):
        _fail(ValueError(f"--format {fmt!r}: use json or yaml"))
    from mutune.services.store import Store
    try:
        with Store.open(resolve_db(db)) as store:
            if hparams:
                from mutune.services.export.hparams import export_hparams, format_export
                text = format_export(export_hparams(store.sweep_rows(sweep_id), width=width,
                                                    depth=depth), fmt)
            else:
                from mutune.services.export.optuna import export_to_optuna
                names = export_to_optuna(store, sweep_id, optuna_storage,
                                         study_prefix=study_prefix, overwrite=overwrite)
    except MutuneError as err:
        _fail(err)
    if not hparams:
        for name in names:
            typer.echo(f"study {name} → {optuna_storage}")
    elif out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {out}")
    else:
        typer.echo(text, nl=False)


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

    from mutune.pipeline.preflight import run_coord_check
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

    from mutune.services.api import resolve_db
    from mutune.pipeline.preflight import run_transfer_check
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


@app.command()
def serve(host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
          port: int = typer.Option(8765, help="TCP port."),
          db: Optional[str] = DbOption,
          data_root: Optional[list[Path]] = typer.Option(
              None, "--data-root", help="A folder submitted configs' data.path may lie under "
                                        "(repeatable; env MUTUNE_DATA_ROOTS as a JSON list)."),
          out: Optional[Path] = typer.Option(None, "--out", help="Folder for each sweep's Ray "
                                             "state and worker log (default mutune-server)."),
          ray_address: Optional[str] = typer.Option(None, "--ray-address",
                                                    help="Run every sweep on this Ray cluster "
                                                         "(default: a local one per sweep)."),
          no_worker: bool = typer.Option(False, "--no-worker",
                                         help="Only queue sweeps; run none here."),
          log_level: str = typer.Option("info", help="uvicorn log level.")) -> None:
    """Start the search server: API v1 under /api/v1, OpenAPI at /docs, the dashboard at /,
    and a worker that runs queued sweeps (one at a time) on Ray."""
    import uvicorn

    from mutune.services.api import resolve_db
    from mutune.services.server.app import create_app
    from mutune.services.server.settings import ServerSettings

    overrides: dict = {"db": resolve_db(db)}
    if data_root:
        overrides["data_roots"] = data_root
    if out is not None:
        overrides["out_dir"] = out
    if ray_address:
        overrides["ray_address"] = ray_address
    if no_worker:
        overrides["run_worker"] = False
    settings = ServerSettings(**overrides)
    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level)


@token_app.command("create")
def token_create(project: str = typer.Option(..., "--project", help="The project every "
                                             "sweep submitted with this token belongs to."),
                 db: Optional[str] = DbOption) -> None:
    """Create an API token; prints it once (only its sha256 is stored)."""
    from mutune.services.api import resolve_db
    from mutune.errors import StoreError
    from mutune.services.server.auth import create_token
    from mutune.services.store import Store

    try:
        with Store.open(resolve_db(db)) as store:
            token_id, token = create_token(store, project)
    except StoreError as err:
        _fail(err)
    typer.echo(token)
    typer.echo(f"token {token_id} for project {project!r}; it is shown only now "
               "(send it as 'Authorization: Bearer <token>')", err=True)


@token_app.command("list")
def token_list(db: Optional[str] = DbOption) -> None:
    """List tokens: id, project, created, revoked (never the token itself)."""
    from mutune.services.api import resolve_db
    from mutune.services.store import Store

    with Store.open(resolve_db(db)) as store:
        for t in store.list_tokens():
            typer.echo(f"{t['id']}\t{t['project']}\t{t['created_at']}\t"
                       f"{'revoked' if t['revoked'] else 'active'}")


@token_app.command("revoke")
def token_revoke(token_id: int = typer.Argument(..., help="Token id (see `token list`)."),
                 db: Optional[str] = DbOption) -> None:
    """Revoke a token (servers stop accepting it within their token cache time, 5 s)."""
    from mutune.services.api import resolve_db
    from mutune.errors import StoreError
    from mutune.services.store import Store

    try:
        with Store.open(resolve_db(db)) as store:
            was = store.token_revoked(token_id)
    except StoreError as err:
        _fail(err)
    typer.echo(f"token {token_id} {'revoked' if was else 'was already revoked'}")


@db_app.command("upgrade")
def db_upgrade(db: Optional[str] = DbOption) -> None:
    """Create or upgrade the results database schema to the latest migration (idempotent)."""
    from mutune.services.api import resolve_db
    from mutune.services.store import upgrade

    url = resolve_db(db)
    upgrade(url)
    typer.echo(f"database at head: {url}")


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
