"""The ``mutune`` typer apps and what their commands share: the ``--db`` option, the console,
opening the results database, printing JSON and failing with a message.

The commands themselves live in :mod:`~mutune.services.cli.sweeps`,
:mod:`~mutune.services.cli.analysis` and :mod:`~mutune.services.cli.admin`; the package's
``__init__`` imports them, which registers them on :data:`app`.
"""
from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import typer

__all__ = ["app", "db_app", "token_app", "DbOption", "PIPE_WIDTH", "make_console", "fail",
           "open_store", "echo_json", "parse_widths", "main"]

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="μP hyperparameter transfer: sweep small proxies, transfer, "
                       "train once at full size, count the GPU-hours saved.")
db_app = typer.Typer(no_args_is_help=True, help="Results database maintenance.")
app.add_typer(db_app, name="db")
token_app = typer.Typer(no_args_is_help=True, help="API tokens of the search server.")
app.add_typer(token_app, name="token")

DbOption = typer.Option(None, "--db", envvar="MUTUNE_DB",
                        help="Results database URL (default sqlite:///mutune.db).")

#: Console width (characters) when the output is not a terminal: wide enough that no table
#: ever shortens a name or a number with "…" (a pipe or a file has no width to fit).
PIPE_WIDTH = 10_000


def make_console(*, stderr: bool = False) -> Any:
    """A rich Console on stdout (or stderr). On a terminal: rich's own, fitted to its width.
    Not a terminal (a pipe, a file, a test runner): :data:`PIPE_WIDTH` wide with soft wrapping,
    so tables keep every name and number whole and text lines are not broken; ``COLUMNS`` is
    ignored there."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=PIPE_WIDTH, soft_wrap=True)


def fail(err: Exception) -> NoReturn:
    """Print ``error: <err>`` on stderr and exit with status 2."""
    make_console(stderr=True).print(f"[red]error:[/] {err}", markup=True, highlight=False)
    raise typer.Exit(code=2)


def open_store(db: str | None, *, create: bool = False) -> Any:
    """The results store at ``db`` (None: ``MUTUNE_DB`` or the default, see
    :func:`mutune.services.api.resolve_db`).

    Args:
        db: the ``--db`` URL.
        create: True only for commands that write a sweep or a token; a command that reads
            (the default) never creates a database.
    Raises:
        StoreError: bad URL, failed migration, or (``create`` False) no database there — the
            message names the database.
    """
    from mutune.services.api import resolve_db
    from mutune.services.store import Store

    return Store.open(resolve_db(db), create=create)


def echo_json(data: Any) -> None:
    """Print ``data`` on stdout as indented JSON (non-finite floats as null, anything else not
    JSON-able as its ``str``)."""
    from mutune._json import json_safe

    typer.echo(json.dumps(json_safe(data), indent=2, default=str))


def parse_widths(text: str) -> list[int]:
    """``"64,128,256"`` → ``[64, 128, 256]``.

    Raises:
        typer.BadParameter: an item is not an integer.
    """
    try:
        return [int(w) for w in text.split(",") if w.strip()]
    except ValueError:
        raise typer.BadParameter(
            f"{text!r}: give comma-separated integers, e.g. 64,128,256") from None


def main() -> None:
    """Console-script entry point (``mutune = "mutune.services.cli:main"``)."""
    app()
