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
