"""``mutune serve``, ``mutune token create / list / revoke`` and ``mutune db upgrade``: running
the search server and looking after its database.

``token create`` and ``db upgrade`` may create the database; ``token list`` and ``token
revoke`` only touch an existing one.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from mutune.services.cli.app import DbOption, app, db_app, fail, open_store, token_app

__all__ = ["serve", "token_create", "token_list", "token_revoke", "db_upgrade"]


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
def token_create(project: str = typer.Option("default", "--project", help="The project "
                                             "every sweep submitted with this token belongs "
                                             "to; `default` also holds the sweeps run from "
                                             "the command line without cost.project."),
                 db: Optional[str] = DbOption) -> None:
    """Create an API token; prints it once (only its sha256 is stored)."""
    from mutune.errors import StoreError
    from mutune.services.server.auth import create_token

    try:
        with open_store(db, create=True) as store:
            token_id, token = create_token(store, project)
    except StoreError as err:
        fail(err)
    typer.echo(token)
    typer.echo(f"token {token_id} for project {project!r}; it is shown only now "
               "(send it as 'Authorization: Bearer <token>')", err=True)


@token_app.command("list")
def token_list(db: Optional[str] = DbOption) -> None:
    """List tokens: id, project, created, revoked (never the token itself)."""
    from mutune.errors import StoreError

    try:
        with open_store(db) as store:
            tokens = store.list_tokens()
    except StoreError as err:
        fail(err)
    for t in tokens:
        typer.echo(f"{t['id']}\t{t['project']}\t{t['created_at']}\t"
                   f"{'revoked' if t['revoked'] else 'active'}")


@token_app.command("revoke")
def token_revoke(token_id: int = typer.Argument(..., help="Token id (see `token list`)."),
                 db: Optional[str] = DbOption) -> None:
    """Revoke a token (servers stop accepting it within their token cache time, 5 s)."""
    from mutune.errors import StoreError

    try:
        with open_store(db) as store:
            was = store.token_revoked(token_id)
    except StoreError as err:
        fail(err)
    typer.echo(f"token {token_id} {'revoked' if was else 'was already revoked'}")


@db_app.command("upgrade")
def db_upgrade(db: Optional[str] = DbOption) -> None:
    """Create or upgrade the results database schema to the latest migration (idempotent)."""
    from mutune.services.api import resolve_db
    from mutune.services.store import upgrade

    url = resolve_db(db)
    upgrade(url)
    typer.echo(f"database at head: {url}")
