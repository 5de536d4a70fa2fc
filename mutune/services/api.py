"""The in-process face of mutune: ``mutune.run(config)`` (docs/architecture.md §1), which runs
the main job into the results store and renders the report from its rows."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mutune.config import SweepConfig, load_config

__all__ = ["run", "rerun", "RunResult", "DEFAULT_DB"]

#: The results database used when neither ``db`` nor ``MUTUNE_DB`` is given.
DEFAULT_DB = "sqlite:///mutune.db"


@dataclass(frozen=True)
class RunResult:
    """The main job's result; ``report`` is report.json's content (docs/architecture.md §11)."""
    sweep_id: int
    report: dict[str, Any]
    report_path: Path
    plot_path: Path
    db: str

    @property
    def proxies(self) -> list[dict[str, Any]]:
        return self.report["proxies"]

    @property
    def rules(self) -> list[dict[str, Any]]:
        return self.report["rules"]

    @property
    def target(self) -> dict[str, Any]:
        return self.report["target"]

    @property
    def cost(self) -> dict[str, Any]:
        return self.report["cost"]


def resolve_db(db: str | None) -> str:
    """``db``, else env ``MUTUNE_DB``, else :data:`DEFAULT_DB`."""
    return db or os.environ.get("MUTUNE_DB") or DEFAULT_DB


def run(config: SweepConfig | str | os.PathLike[str] | None = None, *, db: str | None = None,
        out_dir: str | os.PathLike[str] = "mutune-out", console: Any = None,
        progress: bool = True) -> RunResult:
    """Run the main job: proxy sweeps → transfer rules → one target run → cost report.

    ``config``: a :class:`SweepConfig`, a YAML path, or None for the embedded quickstart; ``db``
    a database URL (default :func:`resolve_db`). The sweep's files (report.json, plots, Ray
    state, the kept target model) go to ``out_dir/sweep-<ID>/``, and ``out_dir/latest`` points
    there (:mod:`mutune.pipeline.run_folder`). A sweep cancelled or out of budget is no error:
    its report carries the ``status`` and ``reason``.

    Raises:
        ConfigError: the config is invalid (field, value, rule).
        MutuneError: a stage failed; the sweep is recorded as failed with the reason."""
    from mutune.errors import SweepStopped
    from mutune.pipeline import run_pipeline
    from mutune.pipeline.run_folder import sweep_folder_name
    from mutune.services.store import Store

    cfg = config if isinstance(config, SweepConfig) else load_config(config)
    url = resolve_db(db)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with Store.open(url) as store:
        try:
            sweep_id = _run_with_progress(run_pipeline, cfg, store, out, console, progress)
        except SweepStopped as stop:
            if stop.sweep_id is None:
                raise
            sweep_id = stop.sweep_id
        rows = store.sweep_rows(sweep_id)
    return _write_outputs(rows, out / sweep_folder_name(sweep_id), url, console)


def _write_outputs(rows: dict[str, Any], out: Path, url: str, console: Any) -> RunResult:
    """The report of a sweep's rows, written to ``out`` (and printed on ``console``)."""
    from mutune.services.report.data import build_report, write_report_json
    from mutune.services.report.plots import plot_loss_vs_lr, plot_transfer
    from mutune.services.report.rung_plot import plot_rungs
    from mutune.services.report.summary import render_summary

    report = build_report(rows)
    report_path = write_report_json(report, out / "report.json")
    plot_path = plot_loss_vs_lr(rows, out / "loss_vs_lr.png")
    if report["rules"]:
        plot_transfer(report, out / "transfer.png")
    plot_rungs(rows, out / "rungs.png")
    if console is not None:
        render_summary(report, console)
        console.print(f"report: {report_path}  plots: {plot_path}"
                      + (f", {out / 'transfer.png'}" if report["rules"] else "")
                      + f", {out / 'rungs.png'}  db: {url}")
    return RunResult(int(rows["sweep"]["id"]), report, report_path, plot_path, url)


def _run_with_progress(run_pipeline: Any, cfg: SweepConfig, store: Any, out: Path,
                       console: Any, progress: bool) -> int:
    """Run the pipeline into its own folder under ``out`` (with a progress display when there is
    a console); its sweep id."""
    if console is None or not progress:
        return run_pipeline(cfg, store, out_dir=out, own_folder=True).sweep_id
    if not console.is_terminal:   # a pipe or a file: plain lines as the work goes
        return run_pipeline(cfg, store, out_dir=out, own_folder=True,
                            on_progress=_plain_progress(console)).sweep_id
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
    tasks: dict[str, Any] = {}
    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console) as bar:
        def on_progress(label: str, done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = bar.add_task(label, total=total)
            bar.update(tasks[label], completed=done)
        return run_pipeline(cfg, store, out_dir=out, own_folder=True,
                            on_progress=on_progress).sweep_id


def _plain_progress(console: Any) -> Any:
    """An ``on_progress`` that prints ``label: done/total`` when a stage starts, at each
    quarter of it and when it ends, with the seconds since the run began."""
    import time

    start = time.monotonic()
    shown: dict[str, int] = {}

    def on_progress(label: str, done: int, total: int) -> None:
        quarter = 4 * done // max(total, 1)
        if shown.get(label) == quarter:
            return
        shown[label] = quarter
        console.print(f"{label}: {done}/{total} ({time.monotonic() - start:.0f} s)",
                      highlight=False)
    return on_progress


def rerun(sweep_id: int, *, db: str | None = None,
          out_dir: str | os.PathLike[str] = "mutune-out", console: Any = None,
          progress: bool = True) -> tuple[RunResult, list[str]]:
    """Re-execute a stored sweep with the same config and seeds (a new sweep id); returns (its
    RunResult, the provenance differences as warnings).

    Raises:
        StoreError: no such sweep, or no results database at ``db``. ConfigError: the stored
            config no longer validates."""
    from mutune.config import parse_config
    from mutune.proxies.task import ProxyTask, load_task_data
    from mutune.pipeline.provenance import collect_provenance, provenance_differences
    from mutune.services.store import Store

    url = resolve_db(db)
    with Store.open(url, create=False) as store:
        rows = store.sweep_rows(sweep_id)
    cfg = parse_config(rows["sweep"]["config"], source=f"sweep {sweep_id} in {url}")
    data = load_task_data(cfg)
    now = collect_provenance({"kind": cfg.data.kind, "fingerprint": data.fingerprint,
                              "size_bytes": data.size_bytes})
    bsh = ProxyTask(cfg.model, cfg.train, data).with_base_shapes().base_shapes
    if bsh is not None:
        now["base_shapes"] = bsh
    warnings = provenance_differences(rows.get("provenance") or {}, now)
    if console is not None:
        for w in warnings:
            console.print(f"[yellow]warning:[/] provenance differs: {w}", highlight=False)
    return run(cfg, db=url, out_dir=out_dir, console=console, progress=progress), warnings


def resume(sweep_id: int, *, db: str | None = None,
           out_dir: str | os.PathLike[str] = "mutune-out", console: Any = None) -> RunResult:
    """Finish an interrupted sweep (``mutune resume SWEEP_ID``, docs/architecture.md §4) and write
    its report like :func:`run`.

    Raises:
        StoreError: no such sweep or database. MutuneError: live trials, or a completed sweep."""
    from mutune.config import parse_config
    from mutune.pipeline.run_folder import resumed_sweep_folder
    from mutune.services.recovery import resume_sweep
    from mutune.services.store import Store

    url = resolve_db(db)
    out = resumed_sweep_folder(Path(out_dir), sweep_id)
    out.mkdir(parents=True, exist_ok=True)

    def on_stale(line: str) -> None:
        if console is not None:
            console.print(f"[yellow]stale:[/] {line}", highlight=False)
    with Store.open(url, create=False) as store:
        rows = store.sweep_rows(sweep_id)
        cfg = parse_config(rows["sweep"]["config"], source=f"sweep {sweep_id} in {url}")
        result = resume_sweep(store, sweep_id, out_dir=out, interrupted=cfg.ray.lease_s,
                              on_stale=on_stale)
        rows = store.sweep_rows(result.sweep_id)
    return _write_outputs(rows, out, url, console)
