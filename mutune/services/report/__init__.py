"""The one report renderer: report.json, the terminal tables and the plots, all from DB rows.

The modules, one idea each: :mod:`~mutune.services.report.data` (``build_report``: the
``report.json`` contract of docs/architecture.md §11; ``write_report_json``),
:mod:`~mutune.services.report.render` (``render_report``: the terminal tables),
:mod:`~mutune.services.report.plots` (``plot_loss_vs_lr``, ``plot_transfer``),
:mod:`~mutune.services.report.projects` (``project_costs``: ``mutune report --by project``),
:mod:`~mutune.services.report.rung_plot` and :mod:`~mutune.services.report.listing`
(``mutune list / show / logs``). The main job, ``mutune report`` and the dashboard call these same
functions. Importing this package imports neither rich nor matplotlib (they load when used).
"""
from __future__ import annotations

from mutune.services.report.data import build_report, write_report_json
from mutune.services.report.plots import plot_loss_vs_lr, plot_transfer
from mutune.services.report.projects import project_costs, render_project_costs
from mutune.services.report.render import render_report

__all__ = ["build_report", "render_report", "write_report_json", "plot_loss_vs_lr",
           "plot_transfer", "project_costs", "render_project_costs"]
