"""``mutune run / report / list / show / cancel / logs / rerun / resume``: running sweeps and
reading what they recorded.

Every command that only reads opens the results database with ``create=False``
(:func:`~mutune.services.cli.app.open_store`): a mistyped ``--db`` is an error naming the
database, never a new empty one. ``--json`` prints machine-readable JSON on stdout instead of
the tables.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from mutune.services.cli.app import DbOption, app, echo_json, fail, make_console, open_store
from mutune.search.schedulers.planned_steps import (DEFAULT_REPORT_OVERHEAD_S,
                                                   DEFAULT_TRIAL_OVERHEAD_S)

__all__ = ["run", "report", "list_cmd", "show", "cancel", "logs", "rerun", "resume"]

OutOption = typer.Option(Path("mutune-out"), "--out",
                         help="Output root: each sweep writes report.json, plots and "
                              "Ray state to its own sweep-ID folder here; 'latest' links "
                              "to the newest.")


@app.command()
def run(config: Optional[Path] = typer.Argument(
            None, help="Sweep config YAML; omitted: the quickstart config shipped with "
                       "mutune (configs/quickstart.yaml)."),
        db: Optional[str] = DbOption,
        out: Path = OutOption,
        dry_run: bool = typer.Option(False, "--dry-run",
                                     help="Print the planned trials, steps, GPU-hours and "
                                          "money (from a short warm-up of each width) and "
                                          "exit; trains and records nothing."),
        warmup_steps: int = typer.Option(5, min=2, help="Steps timed per width (--dry-run)."),
        trial_overhead_s: float = typer.Option(
            DEFAULT_TRIAL_OVERHEAD_S, min=0,
            help="Assumed Ray start-up + teardown per trial, s (--dry-run)."),
        report_overhead_s: float = typer.Option(
            DEFAULT_REPORT_OVERHEAD_S, min=0,
            help="Assumed seconds per report beyond its evaluation: the round trip to the "
                 "driver (--dry-run)."),
        plan_json: Optional[Path] = typer.Option(None, "--plan-json",
                                                 help="Also write the plan here (--dry-run)."),
        ) -> None:
    """Run the main job: proxy sweeps on Ray Tune → transfer rules → one target run → report."""
    from mutune.errors import ConfigError, MutuneError
    from mutune.services.api import run as api_run

    console = make_console()
    if dry_run:
        import json

        from mutune.config import load_config
        from mutune.pipeline.dry_run import plan_sweep
        from mutune.services.report.plan import render_plan
        try:
            plan = plan_sweep(load_config(config), warmup_steps=warmup_steps,
                              overhead_s=trial_overhead_s, report_s=report_overhead_s)
        except MutuneError as err:
            fail(err)
        render_plan(plan, console)
        if plan_json:
            from mutune._json import json_safe
            plan_json.write_text(json.dumps(json_safe(plan), indent=2) + "\n")
        return
    try:
        api_run(config, db=db, out_dir=out, console=console)
    except ConfigError as err:
        fail(err)


@app.command()
def report(sweep_id: Optional[int] = typer.Argument(None, help="Sweep id in the results "
                                                      "database (omit with --by)."),
           db: Optional[str] = DbOption,
           by: Optional[str] = typer.Option(None, "--by", help="'project': sum the ledger "
                                            "of every sweep per project instead."),
           as_json: bool = typer.Option(False, "--json", help="Print report.json (or the "
                                        "per-project sums) on stdout instead of the tables."),
           json_out: Optional[Path] = typer.Option(None, "--json-out",
                                                   help="Also write report.json here."),
           full: bool = typer.Option(False, "--full", help="Every table (per-width optima, "
                                     "rules, gate rounds, target, cost lines), then the "
                                     "summary.")
           ) -> None:
    """Print a sweep's summary again from the database alone (``--full``: every table), or,
    with ``--by project``, GPU-hours and money summed per project across sweeps."""
    from mutune.errors import ConfigError, StoreError
    from mutune.services.report.data import build_report, write_report_json
    from mutune.services.report.projects import project_costs, render_project_costs
    from mutune.services.report.render import render_report
    from mutune.services.report.summary import render_summary

    if by is not None and by != "project":
        fail(ConfigError(f"--by = {by!r}: the only grouping is 'project'"))
    if (by is None) == (sweep_id is None):
        fail(ConfigError("give either a SWEEP_ID or --by project"))
    try:
        with open_store(db) as store:
            if by:
                rows = project_costs(store.list_sweeps(), store.sweep_costs())
            else:
                rows = store.sweep_rows(sweep_id)
    except StoreError as err:
        fail(err)
    data = {"by": "project", "projects": rows} if by else build_report(rows)
    if json_out:
        write_report_json(data, json_out)
    if as_json:
        echo_json(data)
    elif by:
        render_project_costs(rows, make_console())
    elif full:
        render_report(data, make_console())
        render_summary(data, make_console())
    else:
        render_summary(data, make_console())


@app.command("list")
def list_cmd(db: Optional[str] = DbOption,
             status: Optional[str] = typer.Option(None, help="Only sweeps with this status "
                                                             "(running, completed, failed, "
                                                             "cancelled, budget_exhausted)."),
             limit: int = typer.Option(50, min=1, help="At most this many, newest first."),
             as_json: bool = typer.Option(False, "--json", help="Print JSON instead.")
             ) -> None:
    """List the sweeps in the results database: status, widths, trials, GPU-hours."""
    from mutune.errors import StoreError
    from mutune.services.report.listing import render_sweep_list

    try:
        with open_store(db) as store:
            sweeps = store.sweep_summaries(limit=limit, status=status)
    except StoreError as err:
        fail(err)
    if as_json:
        echo_json(sweeps)
    else:
        render_sweep_list(sweeps, make_console())


@app.command()
def show(sweep_id: int = typer.Argument(..., help="Sweep id in the results database."),
         db: Optional[str] = DbOption,
         as_json: bool = typer.Option(False, "--json", help="Print the sweep and its trials "
                                      "as JSON on stdout instead of the tables.")) -> None:
    """One sweep: status and reason, model, provenance, and every trial with its status."""
    from mutune.errors import StoreError
    from mutune.services.report.listing import render_sweep, sweep_overview

    try:
        with open_store(db) as store:
            rows = store.sweep_rows(sweep_id)
    except StoreError as err:
        fail(err)
    if as_json:
        echo_json(sweep_overview(rows))
    else:
        render_sweep(rows, make_console())


@app.command()
def cancel(sweep_id: int = typer.Argument(..., help="Sweep id in the results database."),
           db: Optional[str] = DbOption) -> None:
    """Cancel a running sweep: the process running it starts no new trial, stops the running
    ones, and records the sweep ``cancelled`` (within about a second of its next trial event)."""
    from mutune.errors import StoreError

    try:
        with open_store(db) as store:
            store.request_cancel(sweep_id)
    except StoreError as err:
        fail(err)
    typer.echo(f"sweep {sweep_id}: cancel requested; the running process stops it")


@app.command()
def logs(trial_id: int = typer.Argument(..., help="Trial id (see mutune show SWEEP_ID)."),
         db: Optional[str] = DbOption) -> None:
    """A trial's stdout, stderr and, if it failed, its traceback, as stored in the database."""
    from mutune.errors import StoreError
    from mutune.services.report.listing import render_trial_log

    try:
        with open_store(db) as store:
            log = store.trial_log(trial_id)
    except StoreError as err:
        fail(err)
    render_trial_log(log, make_console())


@app.command()
def rerun(sweep_id: int = typer.Argument(..., help="Sweep id in the results database."),
          db: Optional[str] = DbOption,
          out: Path = OutOption) -> None:
    """Re-execute a stored sweep with the same config and seeds; warns where the recorded
    provenance (package versions, hardware, dataset fingerprint) differs."""
    from mutune.errors import ConfigError, StoreError
    from mutune.services.api import rerun as api_rerun

    try:
        api_rerun(sweep_id, db=db, out_dir=out, console=make_console())
    except (ConfigError, StoreError) as err:
        fail(err)


@app.command()
def resume(sweep_id: int = typer.Argument(..., help="Sweep id in the results database."),
           db: Optional[str] = DbOption,
           out: Path = OutOption) -> None:
    """Finish an interrupted sweep: stale trials (heartbeat older than ray.lease_s) retry from
    their checkpoints, the scheduler continues from its saved state, exactly num_samples
    trials per width in total."""
    from mutune.errors import MutuneError
    from mutune.services.api import resume as api_resume

    try:
        api_resume(sweep_id, db=db, out_dir=out, console=make_console())
    except MutuneError as err:
        fail(err)
