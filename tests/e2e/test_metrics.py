"""Acceptance of the job metrics (issue 22): a 2 x 2 job on the process backend whose ranks print `loss: <x>`, with
metric_definitions: `smdist metrics JOB` gives one series per rank holding every printed value, system metrics per
host, a plot, and the store is delivered with the outputs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from smdist_launcher import PyTorch
from smdist_launcher.cli.main import main
from smdist_launcher.metrics.system import CPU, MEMORY

pytestmark = pytest.mark.slow

STEPS = 6
# No torch in the script (torchrun still rendezvous the 4 ranks): the job starts fast.
TRAIN = f'''
import os, time
rank = int(os.environ["RANK"])
for step in range({STEPS}):
    print(f"step {{step}} loss: {{(rank + 1) / (step + 1):.4f}}", flush=True)
    time.sleep(0.25)
'''


def test_a_2x2_job_has_a_loss_series_per_rank_system_metrics_per_host_and_a_plot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SMDIST_METRICS_INTERVAL_S", "0.5")  # the job lasts seconds: sample often
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(TRAIN)
    jobs = tmp_path / "jobs"
    est = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=2,
                  framework_version="2.3", py_version="py311",
                  distribution={"torch_distributed": {"enabled": True}, "mpi": {"processes_per_host": 2}},
                  metric_definitions=[{"Name": "train:loss", "Regex": "loss: ([0-9.]+)"}],
                  resilience={"log_monitoring": [{"name": "steps", "pattern": r"step (\d+)",
                                                  "expected_every_s": 600}]},
                  base_job_name="metrics")
    job = est.fit(logs=False, jobs_root=str(jobs))
    name = job.job_dir.name

    capsys.readouterr()
    assert main(["metrics", name, "--jobs-dir", str(jobs), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    loss = {s["rank"]: s for s in out["series"] if s["name"] == "train:loss"}
    assert sorted(loss) == [0, 1, 2, 3]
    for rank, s in loss.items():
        assert s["host"] == ("algo-1" if rank < 2 else "algo-2")
        assert [p["value"] for p in s["points"]] == [round((rank + 1) / (k + 1), 4) for k in range(STEPS)]
        assert [p["step"] for p in s["points"]] == list(range(STEPS))  # the log monitor's step capture
    system = {(s["host"], s["name"]) for s in out["series"] if s["kind"] == "system"}
    for host in ("algo-1", "algo-2"):
        assert {(host, CPU), (host, MEMORY)} <= system

    assert main(["metrics", name, "--jobs-dir", str(jobs)]) == 0
    table = capsys.readouterr().out
    assert "train:loss" in table and "CPUUtilization" in table

    png = tmp_path / "metrics.png"
    assert main(["metrics", name, "--jobs-dir", str(jobs), "--plot", str(png), "--format", "csv"]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert (job.job_dir / "output" / "metrics.jsonl").is_file()  # delivered with the outputs
