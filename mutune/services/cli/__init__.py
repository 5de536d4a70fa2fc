"""The ``mutune`` command line (typer). Every command that touches results takes ``--db URL``
(default ``sqlite:///mutune.db``, env ``MUTUNE_DB``); commands that only read never create a
database (docs/architecture.md §1).

:mod:`~mutune.services.cli.app` holds the typer apps and what the commands share; the commands
are registered on :data:`app` by importing their modules, here and in this order (it is the
order ``mutune --help`` lists them in): :mod:`~mutune.services.cli.sweeps` (run, report, list,
show, cancel, logs, rerun, resume), :mod:`~mutune.services.cli.analysis` (replay, export,
coord-check, transfer-check), :mod:`~mutune.services.cli.admin` (serve, token, db upgrade).
"""
from __future__ import annotations

from mutune.services.cli.app import app, main
from mutune.services.cli import sweeps  # noqa: F401  (registers run, report, list, show, …)
from mutune.services.cli import analysis  # noqa: F401  (registers replay, export, …)
from mutune.services.cli import admin  # noqa: F401  (registers serve, token, db)

__all__ = ["app", "main"]
