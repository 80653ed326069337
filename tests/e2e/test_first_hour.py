"""A new user's first hour, run for real: relative data paths, `smdist init` → validate → run, a quiet console."""
from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

LIST_CHANNELS = """\
import os
for name in ("training", "test"):
    print(name, sorted(os.listdir(os.environ["SM_CHANNEL_" + name.upper()])))
"""


def test_fit_reads_relative_paths_against_the_current_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capfd: pytest.CaptureFixture[str]) -> None:
    from smdist_launcher import PyTorch

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SMDIST_JOBS_DIR", str(tmp_path / "jobs"))
    (tmp_path / "train.py").write_text(LIST_CHANNELS)
    for name in ("train", "test"):
        (tmp_path / "data" / name).mkdir(parents=True)
        (tmp_path / "data" / name / f"{name}.csv").write_text("1,2\n")
    est = PyTorch(entry_point="train.py", instance_type="local", instance_count=1,
                  framework_version="2.3", py_version="py311")
    # the plain relative path and the relative file:// form that SageMaker's local mode accepts
    job = est.fit({"training": "data/train", "test": "file://data/test"}, job_name="relative-inputs")
    assert job.status == "Completed"
    out = capfd.readouterr().out
    assert "training ['train.csv']" in out and "test ['test.csv']" in out
