"""Each sweep's own output folder (mutune.pipeline.run_folder): a second sweep never
overwrites the first's files, ``latest`` follows the newest, a folder left by another
database's sweep of the same id is moved aside rather than mixed in or deleted, and a sweep
recorded before sweeps had folders resumes where its Ray state is."""
from __future__ import annotations

import logging

from mutune.pipeline.run_folder import (LATEST, fresh_sweep_folder, resumed_sweep_folder,
                                        sweep_folder_name)


def test_each_sweep_gets_its_own_folder_and_latest_follows_the_newest(tmp_path):
    first = fresh_sweep_folder(tmp_path, 1)
    (first / "report.json").write_text("first")
    second = fresh_sweep_folder(tmp_path, 2)
    assert (first.name, second.name) == (sweep_folder_name(1), sweep_folder_name(2))
    assert (first / "report.json").read_text() == "first"
    assert (tmp_path / LATEST).resolve() == second.resolve()
    assert sorted(p.name for p in tmp_path.iterdir()) == [LATEST, "sweep-1", "sweep-2"]


def test_a_folder_of_another_database_is_moved_aside_not_reused(tmp_path, caplog):
    old = tmp_path / "sweep-1"
    (old / "ray").mkdir(parents=True)
    (old / "report.json").write_text("another database's sweep 1")
    with caplog.at_level(logging.WARNING, logger="mutune.pipeline.run_folder"):
        new = fresh_sweep_folder(tmp_path, 1)
    assert new == old and list(new.iterdir()) == []
    (moved,) = tmp_path.glob("sweep-1.moved-*")
    assert (moved / "report.json").read_text() == "another database's sweep 1"
    assert str(moved) in caplog.text


def test_a_resumed_sweep_continues_in_the_folder_that_holds_its_ray_state(tmp_path):
    assert resumed_sweep_folder(tmp_path, 3) == tmp_path / "sweep-3"     # nothing yet
    (tmp_path / "ray" / "sweep3-w16-w32").mkdir(parents=True)              # the flat layout
    assert resumed_sweep_folder(tmp_path, 3) == tmp_path
    assert resumed_sweep_folder(tmp_path, 4) == tmp_path / "sweep-4"
    fresh_sweep_folder(tmp_path, 3)
    assert resumed_sweep_folder(tmp_path, 3) == tmp_path / "sweep-3"
