"""Trial checkpoints: one file per checkpoint folder, written atomically."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

from mutune.errors import SearchError

__all__ = ["STATE_FILE", "STEP_FILE", "save_trial_state", "load_trial_state",
           "latest_checkpoint"]

#: The file inside a checkpoint folder.
STATE_FILE = "trial_state.pt"
#: the checkpoint's training step as text, written after the state file (read without torch)
STEP_FILE = "step.txt"


def save_trial_state(directory: str | os.PathLike[str], state: dict[str, Any], *,
                     durable: bool = True) -> Path:
    """Write ``state`` to ``directory/trial_state.pt`` atomically (temp file, fsync,
    ``os.replace``).

    Returns:
        The path of the state file."""
    import torch

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / STATE_FILE
    fd, tmp = tempfile.mkstemp(prefix=f".{STATE_FILE}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(state, fh)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if isinstance(state.get("step"), int):      # after the state: never a step it lacks
        step_tmp = folder / f".{STEP_FILE}.tmp"
        step_tmp.write_text(str(state["step"]))
        os.replace(step_tmp, folder / STEP_FILE)
    return target


def load_trial_state(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """Read the state saved by :func:`save_trial_state` (tensors only, no pickled code).

    Raises:
        SearchError: the folder has no ``trial_state.pt`` or it cannot be read."""
    import torch

    path = Path(directory) / STATE_FILE
    if not path.is_file():
        raise SearchError(f"checkpoint folder {directory} has no {STATE_FILE}")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the same error
        raise SearchError(f"cannot read checkpoint {path}: {exc}") from exc


def latest_checkpoint(trial_dir: str | os.PathLike[str] | None,
                      at_most: int | None = None) -> str | None:
    """The newest complete ``checkpoint_NNNNNN`` folder of a Ray trial folder, or None."""
    if not trial_dir or not Path(trial_dir).is_dir():
        return None
    found = sorted(p.parent for p in Path(trial_dir).glob(f"checkpoint_*/{STATE_FILE}"))
    for folder in reversed(found):
        step = folder / STEP_FILE
        if at_most is None or not step.is_file() or int(step.read_text()) <= at_most:
            return str(folder)
    return None
