"""The target's checkpoint folders reach Ray Train's storage by a rename when both are local,
by Ray's own copy otherwise (mutune.search.backends.ray_train_upload), on Ray Train's real
StorageContext."""
from __future__ import annotations

import errno

import pytest

pytest.importorskip("ray.train.v2._internal.execution.storage")

from ray.train import Checkpoint  # noqa: E402
from ray.train.v2._internal.execution.storage import StorageContext  # noqa: E402

from mutune.search.backends import ray_train_upload  # noqa: E402
from mutune.search.backends.ray_train_upload import storage_mover  # noqa: E402


class _Context:
    """What ``ray.train.get_context()`` gives a worker, as far as the mover reads it."""

    def __init__(self, storage):
        self.storage = storage

    def get_storage(self):
        if self.storage is None:      # Ray's LocalTrainContext (no storage) says so this way
            raise NotImplementedError("Local storage context not yet implemented. ")
        return self.storage


def _folder(path, payload: bytes):
    path.mkdir(parents=True)
    (path / "state.pt").write_bytes(payload)
    return Checkpoint.from_directory(str(path))


def test_a_local_scratch_folder_is_renamed_into_the_run_storage(tmp_path):
    storage = StorageContext(str(tmp_path / "storage"), "target-run")
    move = storage_mover(_Context(storage))
    assert move is not None
    src = tmp_path / "scratch" / "step_000000020"
    ckpt = _folder(src, b"x" * 4096)
    inode = (src / "state.pt").stat().st_ino
    out = move(ckpt, "checkpoint_2026-12-04_00-00-00.000000")
    dest = tmp_path / "storage" / "target-run" / "checkpoint_2026-12-04_00-00-00.000000"
    assert out.path == str(dest)
    assert (dest / "state.pt").read_bytes() == b"x" * 4096
    assert (dest / "state.pt").stat().st_ino == inode        # the same file: moved, not copied
    assert not src.exists()


@pytest.mark.parametrize("code", [errno.EXDEV, errno.ENOTEMPTY])
def test_a_folder_that_cannot_be_renamed_takes_ray_s_copy(tmp_path, monkeypatch, code):
    storage = StorageContext(str(tmp_path / "storage"), "target-run")
    move = storage_mover(_Context(storage))

    def refuse(src, dst):
        raise OSError(code, "refused", str(src))
    monkeypatch.setattr(ray_train_upload.os, "rename", refuse)
    src = tmp_path / "scratch" / "step_000000020"
    ckpt = _folder(src, b"y" * 100)
    out = move(ckpt, "checkpoint_a")
    assert (tmp_path / "storage" / "target-run" / "checkpoint_a" / "state.pt").read_bytes() \
        == b"y" * 100
    assert out.path.endswith("checkpoint_a")
    assert src.exists()          # a copy leaves the scratch folder to its owner


def test_any_other_rename_error_is_raised(tmp_path, monkeypatch):
    move = storage_mover(_Context(StorageContext(str(tmp_path / "s"), "run")))

    def refuse(src, dst):
        raise PermissionError(errno.EACCES, "denied", str(dst))
    monkeypatch.setattr(ray_train_upload.os, "rename", refuse)
    with pytest.raises(PermissionError):
        move(_folder(tmp_path / "scratch", b"z"), "checkpoint_b")


def test_no_mover_without_a_local_storage(tmp_path):
    import pyarrow.fs

    assert storage_mover(_Context(None)) is None            # no storage context to move into
    remote_like = StorageContext(str(tmp_path / "s"), "run", storage_filesystem=(
        pyarrow.fs.SubTreeFileSystem(str(tmp_path), pyarrow.fs.LocalFileSystem())))
    assert storage_mover(_Context(remote_like)) is None      # not a plain local filesystem
