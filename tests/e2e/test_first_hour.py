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
    from smdist_launcher.errors import ValidationError

    with pytest.raises(ValidationError, match="is the path datta/train relative to the current folder"):
        est.fit({"training": "file://datta/train"})                  # a typo fails before anything starts
    assert not (tmp_path / "jobs").exists()
    job = est.fit({"training": "data/train", "test": "file://data/test"}, job_name="relative-inputs")
    assert job.status == "Completed"
    out = capfd.readouterr().out
    assert "training ['train.csv']" in out and "test ['test.csv']" in out


PLAIN_DDP = """\
import torch.distributed as dist
print("script started", flush=True)
dist.init_process_group("gloo")   # env:// : torchrun sets RANK, mpirun does not
"""

MPI_JOB = """\
framework: pytorch
entry_point: train.py
instance_type: local
instance_count: 2
framework_version: "2.3"
py_version: py311
distribution:
  mpi: {enabled: true, processes_per_host: 2}
"""


@pytest.mark.mpi
def test_a_failing_mpi_job_shows_the_users_output_and_one_clear_summary(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from smdist_launcher.cli.main import main

    (tmp_path / "train.py").write_text(PLAIN_DDP)
    (tmp_path / "job.yaml").write_text(MPI_JOB)
    code = main(["run", str(tmp_path / "job.yaml"), "--jobs-dir", str(tmp_path / "jobs"), "--job-name", "plain-ddp"])
    io = capsys.readouterr()
    assert code == 1, io.out + io.err
    out = io.out
    assert "] script started" in out                              # the user's own output
    assert out.count("Traceback (most recent call last):") == 1  # the first failure's; the others' are in the logs
    assert "goes to the log files only" in out
    for noise in ("JOB MAP", "Data for node", "LD_LIBRARY_PATH", "is not empty", "running: ", "MPI worker",
                  "FI_PROVIDER", "mpirun detected", "success"):
        assert noise not in out, noise
    # the summary: who failed first, the traceback's tail, and what to do about it
    assert "rank" in io.err and "failed first with exit code 1" in io.err
    assert "RANK expected, but not set" in io.err
    assert "hint: torch's env:// rendezvous needs RANK" in io.err and "use torch_distributed" in io.err
    log = (tmp_path / "jobs" / "plain-ddp" / "logs" / "algo-1.log").read_text()
    assert "JOB MAP" in log and "running: mpirun" in log           # the logs keep everything
    logs = log + (tmp_path / "jobs" / "plain-ddp" / "logs" / "algo-2.log").read_text()
    assert logs.count("script started") == 4 and logs.count("Traceback (most recent call last):") >= 2
