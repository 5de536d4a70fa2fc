"""Checkpoint retention on disk: what a trial keeps, and dropping what nothing will resume."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["checkpoint_bytes_on_disk", "drop_checkpoints"]


def checkpoint_bytes_on_disk(trial_dir: str | None) -> int:
    """Bytes of the checkpoint folders (``checkpoint_*``) Ray Tune keeps for a trial."""
    if not trial_dir or not os.path.isdir(trial_dir):
        return 0
    return sum(f.stat().st_size for d in Path(trial_dir).glob("checkpoint_*")
               for f in d.rglob("*") if f.is_file())


def drop_checkpoints(trial_dir: str | None) -> None:
    """Delete a finished trial's checkpoint folders (retention: a trial stopped at a rung or
    diverged will never be resumed)."""
    if trial_dir and os.path.isdir(trial_dir):
        for d in Path(trial_dir).glob("checkpoint_*"):
            shutil.rmtree(d, ignore_errors=True)
