"""How the target run's checkpoint folders reach Ray Train's storage: moved, not copied,
when both sit on one local filesystem."""
from __future__ import annotations

import errno
import inspect
import os
from pathlib import Path
from typing import Any, Callable

__all__ = ["storage_mover"]


def storage_mover(context: Any) -> Callable[[Any, str], Any] | None:
    """A ``checkpoint_upload_fn`` for ``ray.train.report`` that moves the reported folder into the
    run's storage (module docstring), or None where Ray's default copy has to do: this Ray's
    ``report`` takes no ``checkpoint_upload_fn`` (an older Ray), the train context gives no
    storage (``get_storage``, a Ray DeveloperAPI), or the storage is not a local filesystem."""
    import ray.train

    if "checkpoint_upload_fn" not in inspect.signature(ray.train.report).parameters:
        return None
    try:
        storage = context.get_storage()
        import pyarrow.fs

        local = isinstance(storage.storage_filesystem, pyarrow.fs.LocalFileSystem)
    except (AttributeError, NotImplementedError, ImportError):
        return None
    if not local:
        return None

    def move(checkpoint: Any, dir_name: str) -> Any:
        dest = Path(storage.build_checkpoint_path_from_name(dir_name))
        src = Path(checkpoint.path)
        if isinstance(checkpoint.filesystem, type(storage.storage_filesystem)) and src.is_dir():
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(src, dest)
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.ENOTEMPTY, errno.EEXIST):
                    raise
            else:
                return ray.train.Checkpoint(str(dest), filesystem=storage.storage_filesystem)
        return storage.persist_current_checkpoint(checkpoint, dir_name)   # Ray's copy

    return move
