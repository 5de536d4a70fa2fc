"""Each sweep's own output folder under an output root: ``<root>/sweep-<ID>/`` holds its
``report.json``, plots, base shapes, Ray state and kept target model, and ``<root>/latest``
points at the newest (as W&B's ``wandb/latest-run`` or Ray Tune's one folder per experiment),
so a second run never overwrites the first's files."""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path

__all__ = ["sweep_folder_name", "fresh_sweep_folder", "resumed_sweep_folder", "LATEST"]

log = logging.getLogger(__name__)

#: the link under the output root to the newest sweep's folder
LATEST = "latest"


def sweep_folder_name(sweep_id: int) -> str:
    """``sweep-<ID>``: the folder name of sweep ``sweep_id`` (the server's folders too)."""
    return f"sweep-{int(sweep_id)}"


def fresh_sweep_folder(root: Path, sweep_id: int) -> Path:
    """``<root>/sweep-<ID>/`` made for a new sweep, and ``<root>/latest`` pointed at it.

    A folder already there under that name belongs to a sweep of another results database
    (or of one since deleted): it is moved aside to ``sweep-<ID>.moved-<UTC time>``, never
    deleted, and a warning names both paths."""
    root = Path(root)
    folder = root / sweep_folder_name(sweep_id)
    if folder.exists():
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = folder.with_name(f"{folder.name}.moved-{stamp}")
        n = 1
        while aside.exists():
            n += 1
            aside = folder.with_name(f"{folder.name}.moved-{stamp}-{n}")
        folder.rename(aside)
        log.warning("%s held another database's sweep %d: moved to %s", folder, sweep_id, aside)
    folder.mkdir(parents=True)
    _point_latest(root, folder.name)
    return folder


def resumed_sweep_folder(root: Path, sweep_id: int) -> Path:
    """The folder a resumed sweep continues in: ``<root>/sweep-<ID>/`` when it exists; else
    ``root`` itself when it holds this sweep's Ray state written before sweeps had folders of
    their own (``ray/sweep<ID>-*``); else ``<root>/sweep-<ID>/``."""
    root = Path(root)
    folder = root / sweep_folder_name(sweep_id)
    if not folder.exists() and any((root / "ray").glob(f"sweep{int(sweep_id)}-*")):
        return root
    return folder


def _point_latest(root: Path, name: str) -> None:
    """``<root>/latest`` → ``name``, replaced atomically; skipped (logged) where the file
    system has no symbolic links or ``latest`` is a real folder."""
    tmp = root / f".{LATEST}-{os.getpid()}"
    try:
        if tmp.is_symlink():
            tmp.unlink()
        os.symlink(name, tmp, target_is_directory=True)
        os.replace(tmp, root / LATEST)
    except OSError as err:
        log.info("no %s link in %s: %s", LATEST, root, err)
        if tmp.is_symlink():
            tmp.unlink()
