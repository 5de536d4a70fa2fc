"""A trial's captured output file (mutune.search.trial.logs): written at each save that has
something new, complete whenever a report is handed over."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mutune.search.trial.logs import capture, collect


def test_a_save_writes_only_what_is_new_and_the_file_stays_complete(tmp_path, monkeypatch):
    writes = []
    real = Path.write_text

    def counted(self, *args, **kwargs):
        writes.append(self.name)
        return real(self, *args, **kwargs)
    monkeypatch.setattr(Path, "write_text", counted)
    with capture(tmp_path, "w64-t0") as log:
        log.save()                                   # the first report: the file exists
        assert json.loads((tmp_path / "w64-t0.json").read_text())["stdout"] == ""
        log.save()
        log.save()                                   # quiet reports: nothing rewritten
        assert len(writes) == 1
        print("step 10 ok")
        log.save()                                   # new output: written at once
        assert len(writes) == 2
        assert json.loads((tmp_path / "w64-t0.json").read_text())["stdout"] == "step 10 ok\n"
    assert len(writes) == 2                          # the block's end had nothing new
    assert collect(tmp_path, "w64-t0")["stdout"] == "step 10 ok\n"


def test_a_traceback_is_always_written(tmp_path):
    with pytest.raises(ValueError), capture(tmp_path, "t1") as log:
        log.save()
        raise ValueError("boom")
    rec = json.loads((tmp_path / "t1.json").read_text())
    assert "ValueError: boom" in rec["traceback"] and rec["stdout"] == ""


def test_rays_end_of_a_stopped_trial_writes_nothing_after_collection(tmp_path):
    """Ray ends a stopped trial's thread with SystemExit(0) at its next report; by then the
    driver has collected and deleted the file (and, at the run's end, its folder): the end
    adds no traceback and leaves no file behind. Another exit code is the trial's error."""
    with pytest.raises(SystemExit), capture(tmp_path, "w16-t0") as log:
        log.save()                                   # the last report's save
        assert collect(tmp_path, "w16-t0") is not None     # the driver collects it
        raise SystemExit(0)
    assert not (tmp_path / "w16-t0.json").exists()
    with pytest.raises(SystemExit), capture(tmp_path, "w16-t1"):
        raise SystemExit(3)
    assert "SystemExit: 3" in json.loads((tmp_path / "w16-t1.json").read_text())["traceback"]
