"""`smdist run` on the mnist example (tiny data) for each launcher, then `smdist jobs` and `smdist logs`."""
from __future__ import annotations

import sys
import tarfile
from pathlib import Path

import pytest

from smdist_launcher.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mnist"




# One launcher through the CLI: mpirun's (mpi, pytorchddp) runs the process backend in test_runtime_scripts,
# test_exposure, test_heterogeneous and test_faults; the CLI path is the same for every launcher.
@pytest.mark.parametrize("launcher", ["torch_distributed"])
def test_mnist_example_runs_on_two_hosts(ws, tiny_mnist, capsys, launcher):
    jobs = str(ws.jobs)
    code = main(["run", str(EXAMPLE / f"job_{launcher}.yaml"), "--instance-count", "2", "--processes-per-host", "2",
                 "--input", f"training={tiny_mnist}/train", "--input", f"test={tiny_mnist}/test",
                 "--jobs-dir", jobs, "--job-name", f"cli-{launcher.replace('_', '-')}"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "[algo-1 r0] training on 256 images, world size 4" in out
    assert "test accuracy" in out
    job = ws.jobs / f"cli-{launcher.replace('_', '-')}"
    with tarfile.open(job / "output" / "model.tar.gz") as tar:
        assert tar.getnames() == ["model.pth"]

    assert main(["jobs", "--jobs-dir", jobs]) == 0
    listing = capsys.readouterr().out
    assert f"cli-{launcher.replace('_', '-')}" in listing and "Completed" in listing and "2x2" in listing
    assert main(["logs", "cli", "--host", "algo-1", "--jobs-dir", jobs, "--follow"]) == 0
    assert "saved model to" in capsys.readouterr().out


def test_cli_exit_codes_for_bad_input_and_failed_jobs(ws, capsys):
    job_file = str(EXAMPLE / "job_torch_distributed.yaml")
    assert main(["run", job_file, "--processes-per-host", "0", "--jobs-dir", str(ws.jobs)]) == 2
    assert "distribution.mpi.processes_per_host" in capsys.readouterr().err
    assert main(["run", job_file, "--input", "oops", "--jobs-dir", str(ws.jobs)]) == 2
    code = main(["run", job_file, "--input", f"training={ws.root}/nowhere", "--input", f"test={ws.root}/nowhere",
                 "--jobs-dir", str(ws.jobs), "--job-name", "cli-missing-data"])
    err = capsys.readouterr().err
    assert code == 1
    assert "inputs." in err and "nowhere does not exist" in err
    assert main(["logs", "no-such-job", "--jobs-dir", str(ws.jobs)]) == 2


def test_jobs_marks_a_record_whose_launcher_died(ws, capsys):
    import json
    import subprocess

    from smdist_launcher.backends.toolkit.records import JobRecord

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    job = ws.jobs / "orphan-1"
    job.mkdir(parents=True)
    JobRecord(job_name="orphan-1", job_id="x", job_dir=str(job), launcher_pid=dead.pid).save(job / "job.json")
    assert main(["jobs", "--jobs-dir", str(ws.jobs)]) == 0
    assert "Interrupted" in capsys.readouterr().out
    assert main(["jobs", "--jobs-dir", str(ws.jobs), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "Interrupted"
