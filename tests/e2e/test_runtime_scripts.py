"""The runtimes' own example scripts through local mode, 2 simulated hosts x 2 CPU processes:
the seed's SMP v1 scripts (TP; TP + PP), the SMP v2 script (TP x hybrid shard), and SMDDP's
two-line change under both distributions that start it (pytorchddp, smdistributed.dataparallel).
Each job file is run as `smdist run` runs it, unmodified."""
from __future__ import annotations

import json
import os
import re
import sys
import tarfile
from pathlib import Path

import pytest

from smdist_launcher.backends.toolkit.process_sweep import job_processes
from smdist_launcher.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LOSS = re.compile(r"\[algo-1 r0\] step (\d+) loss (\d+\.\d+)")


def run_example(ws, capsys, job_file: Path, name: str) -> tuple[dict, str]:
    """`smdist run JOB_FILE` into the test's jobs folder; (job record, console output)."""
    code = main(["run", str(job_file), "--jobs-dir", str(ws.jobs), "--job-name", name])
    out = capsys.readouterr().out
    assert code == 0, out
    record = json.loads((ws.jobs / name / "job.json").read_text())
    assert record["status"] == "Completed", out
    assert job_processes(record["job_id"]) == [], "a process of the job survived"
    return record, out


def losses(out: str) -> dict[int, float]:
    return {int(step): float(loss) for step, loss in LOSS.findall(out)}


@pytest.mark.parametrize("job, steps", [
    pytest.param("job_v1_tp.yaml", 4, marks=pytest.mark.mpi, id="v1-tp2-dp2"),
    pytest.param("job_v1_tp_pp.yaml", 3, marks=pytest.mark.mpi, id="v1-tp2-pp2"),
    pytest.param("job_v2.yaml", 4, id="v2-tp2-hsdp2"),
])
def test_smp_example_trains_on_two_hosts(ws, capsys, job, steps):
    name = "smp-" + job[4:-5].replace("_", "-")
    record, out = run_example(ws, capsys, EXAMPLES / "smp" / job, name)
    assert sorted(record["hosts"]) == ["algo-1", "algo-2"]
    seen = losses(out)
    assert sorted(seen) == list(range(steps)), out
    assert all(0.0 < loss < 100.0 for loss in seen.values()), seen
    if job == "job_v2.yaml":
        assert "saved a DCP checkpoint" in out
        with tarfile.open(ws.jobs / name / "output" / "model.tar.gz") as tar:
            assert any(n.startswith("checkpoint/") for n in tar.getnames())


# pytorchddp's job: smdistributed.dataparallel's (job_dataparallel.yaml) runs the same mpirun + smddprun on the process
# backend in test_sagemaker_scripts (smddp_legacy_api, smddp_modern_api), and its plan is pinned.
@pytest.mark.mpi
@pytest.mark.parametrize("job", ["job_pytorchddp.yaml"])
def test_smddp_two_line_change_on_two_hosts(ws, capsys, monkeypatch, job):
    # smddprun must come from the runtime's own PATH handling, not from an activated venv.
    bindir = os.path.dirname(sys.executable)
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != bindir))
    name = "smddp-" + job[4:-5]
    _, out = run_example(ws, capsys, EXAMPLES / "smddp" / job, name)
    # the plan's mpirun argv, as the master host ran it (in its log; the console keeps to the ranks' output)
    assert " smddprun " in (ws.jobs / name / "logs" / "algo-1.log").read_text()
    assert "[algo-1 r0] world 4: sum of ranks 6" in out  # every rank checked the sum itself
    seen = losses(out)
    assert sorted(seen) == [0, 1, 2] and seen[2] < seen[0], seen
