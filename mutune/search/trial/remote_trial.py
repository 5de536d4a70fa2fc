"""A trial's remote checkpoint tier (``ray.storage``): what the trainable does with it."""
from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from mutune.search.trial.remote import CheckpointStore, Uploader, safe_name

__all__ = ["RemoteTier", "remote_settings", "remote_store", "restore_dir_for", "CONTINUE"]

#: ``restore_from`` of a trial the driver continues with no local checkpoint folder known:
#: restore the remote latest if there is one (``ray.storage``), else start fresh.
CONTINUE = "ray.storage:latest"
#: Seconds a stopping trial waits for its last upload before it gives up (the local copy and
#: the previous remote checkpoint stand).
FLUSH_TIMEOUT_S = 600.0
_KEEP_LOCAL = 2


def _step_of(folder: Path) -> int:
    return int(folder.name.rsplit("_", 1)[-1])


class RemoteTier:
    """The remote tier of one trial start (docs/architecture.md §4.6)."""

    def __init__(self, store: CheckpointStore, key: str, owner: str, *,
                 min_interval_s: float, stop_at: set[int], max_t: int) -> None:
        self.store, self.key, self.owner = store, key, owner
        self.stop_at, self.max_t = stop_at, max_t
        self.uploader = Uploader(store, key, min_interval_s=min_interval_s, owner=owner)
        self.remote_restore_s = 0.0
        self.start_wall = time.time()
        tag = hashlib.sha1(f"{store.storage}|{store.run}".encode()).hexdigest()[:12]
        self.cache_dir = (Path(tempfile.gettempdir()) / "mutune-ckpt" / tag
                          / safe_name(key) / safe_name(owner))
        self.cache_dir.mkdir(parents=True, exist_ok=True)

    @classmethod
    def for_trial(cls, config: dict[str, Any], key: str, owner: str) -> "RemoteTier | None":
        """The tier ``config["remote"]`` names for trial ``key`` (Ray trial ``owner``), or None."""
        settings = config.get("remote")
        if not settings or not settings.get("storage"):
            return None
        store = CheckpointStore(str(settings["storage"]), str(settings["run"]))
        return cls(store, key, owner,
                   min_interval_s=float(settings.get("min_interval_s") or 0.0),
                   stop_at={int(m) for m in config.get("checkpoint_at") or ()},
                   max_t=int(config["max_t"]))

    def for_ray(self, folder: Path | None, step: int) -> Path | None:
        """The checkpoint folder to hand Ray with this report: only the final one."""
        return folder if folder is not None and step >= self.max_t else None

    def checkpointed(self, metrics: dict[str, Any], folder: Path | None) -> None:
        """Queue ``folder``'s upload (waited for where the trial stops); figures into ``metrics``.
        """
        from mutune.search.trial.checkpoint import STATE_FILE

        step = int(metrics.get("step", 0))
        if folder is not None:
            self.uploader.submit(step, Path(folder) / STATE_FILE)
            if metrics.get("preempted") or step >= self.max_t or step in self.stop_at:
                self.uploader.flush(FLUSH_TIMEOUT_S)
            self._trim()
        up = self.uploader
        metrics.update({"upload_s": up.upload_s, "uploads": float(up.uploads),
                        "remote_step": float(-1 if up.uploaded_step is None
                                             else up.uploaded_step),
                        "remote_restore_s": self.remote_restore_s,
                        "start_wall": self.start_wall})
        if up.error:
            metrics["upload_error"] = up.error

    def _local(self) -> list[Path]:
        from mutune.search.trial.checkpoint import STATE_FILE

        return sorted((p.parent for p in self.cache_dir.glob(f"step_*/{STATE_FILE}")),
                      key=_step_of)

    def _trim(self) -> None:
        """Keep the cache's newest checkpoints."""
        for old in self._local()[:-_KEEP_LOCAL]:
            shutil.rmtree(old, ignore_errors=True)

    def restore(self, dest: Path, *, continued: bool, at_most: int | None = None
                ) -> str | None:
        """The folder to restore from: the cache's newest, or a newer remote one downloaded."""
        local = [p for p in self._local() if at_most is None or _step_of(p) <= at_most]
        entry = self.store.entry_at_most(self.key, at_most)
        if entry is not None and not continued and entry[1] != self.owner:
            entry = None
        if local and (entry is None or _step_of(local[-1]) >= entry[0]):
            return str(local[-1])
        if entry is None:
            return None
        t0 = time.perf_counter()
        folder = self.store.download(self.key, entry[0], dest)    # the entry checked above
        self.remote_restore_s = time.perf_counter() - t0
        return str(folder)

    def upload_log(self, local_file: Path) -> None:
        """Upload the trial's log record (at the end of its start)."""
        self.store.put_log(self.key, local_file)

    def close(self, finished: bool) -> None:
        """Wait (bounded) for the last upload and stop the thread; clear the cache at ``max_t``."""
        self.uploader.flush(FLUSH_TIMEOUT_S)
        self.uploader.close()
        if finished:
            shutil.rmtree(self.cache_dir, ignore_errors=True)


def remote_settings(ray_cfg: Any, run: str, spot: dict[str, Any] | None) -> dict[str, Any]:
    """A trial config's remote tier ``{"storage", "run", "min_interval_s"}`` (storage None: none).
    """
    return {"storage": getattr(ray_cfg, "storage", None), "run": run,
            "min_interval_s": float((spot or {}).get("checkpoint_min_interval_s") or 0.0)}


def remote_store(ray_cfg: Any, run: str) -> CheckpointStore | None:
    """The driver's handle on run ``run``'s remote store, or None without ``ray.storage``."""
    storage = getattr(ray_cfg, "storage", None)
    return CheckpointStore(storage, run) if storage else None


def restore_dir_for(ckpt: Any, point: dict[str, Any], remote: Any, tmp: str,
                    stack: Any) -> str | None:
    """Where a trial (re)starts from (None: a fresh start).

    Raises:
        SearchError: a named checkpoint is not on this node and no ``ray.storage`` holds it."""
    from mutune.errors import SearchError
    from mutune.search.trial.checkpoint import STATE_FILE

    restore_from = point.get("restore_from")
    if ckpt is not None:
        path = getattr(ckpt, "path", None)
        local = getattr(getattr(ckpt, "filesystem", None), "type_name", "local") == "local"
        if not local or (path and Path(path, STATE_FILE).is_file()):
            return stack.enter_context(ckpt.as_directory())
    if restore_from and restore_from != CONTINUE and Path(restore_from, STATE_FILE).is_file():
        return restore_from
    if remote is not None:
        return remote.restore(Path(tmp) / "remote", continued=bool(restore_from),
                              at_most=point.get("restore_at_most"))
    if ckpt is not None or (restore_from and restore_from != CONTINUE):
        raise SearchError(f"the trial's checkpoint {getattr(ckpt, 'path', None) or restore_from}"
                          " is not on this node and no ray.storage is set to restore it from")
    return None
