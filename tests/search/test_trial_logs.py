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
