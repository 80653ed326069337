"""backends/toolkit/outputs.py deliver_job_outputs: a job's end delivers its checkpoints also when packing its model
failed (issue 32: a full disk or a stop while packing must not lose the checkpoints' upload too)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from smdist_launcher.backends.toolkit import packing
from smdist_launcher.backends.toolkit.outputs import checkpoint_dir, deliver_job_outputs
from smdist_launcher.backends.toolkit.supervisor import Interrupted
from smdist_launcher.contract import MLPaths

from ..plans import tiny_plan


def test_checkpoints_are_saved_when_packing_the_model_fails(tmp_path: Path) -> None:
    job = tmp_path / "job"
    plan = tiny_plan(checkpoint_s3_uri=f"file://{tmp_path}/ckpt")
    hosts = {h: MLPaths(job / "hosts" / h / "opt" / "ml") for h in ("algo-1", "algo-2")}
    for h, paths in hosts.items():
        paths.model_dir.mkdir(parents=True)
        (paths.model_dir / "weights.bin").write_bytes(b"w")
        checkpoint_dir(plan, paths).mkdir(parents=True)
        (checkpoint_dir(plan, paths) / f"step-{h}.pt").write_bytes(b"c")
    (job / "output" / "model.tar.gz.partial").mkdir(parents=True)  # the archive cannot be written: a real failure
    delivered = deliver_job_outputs(plan, hosts, job / "output")
    assert isinstance(delivered.error, OSError) and delivered.model_data is None
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["step-algo-1.pt", "step-algo-2.pt"]


@pytest.mark.parametrize("stop", ["SIGTERM", "Ctrl-C"])
def test_a_stop_while_packing_is_a_stop_and_still_saves_checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    stop: str) -> None:
    """SIGTERM (Interrupted) or Ctrl-C (KeyboardInterrupt, which went past deliver_job_outputs before: no checkpoint
    was saved) while the model is packed."""
    job = tmp_path / "job"
    plan = tiny_plan(checkpoint_s3_uri=f"file://{tmp_path}/ckpt")
    hosts = {"algo-1": MLPaths(job / "hosts" / "algo-1" / "opt" / "ml")}
    paths = hosts["algo-1"]
    paths.model_dir.mkdir(parents=True)
    (paths.model_dir / "weights.bin").write_bytes(os.urandom(9 << 20))
    checkpoint_dir(plan, paths).mkdir(parents=True)
    (checkpoint_dir(plan, paths) / "step-1.pt").write_bytes(b"c")
    monkeypatch.setattr(packing, "PROGRESS_AFTER_S", 0.0)

    def stopped(line: str) -> None:  # what the launcher's SIGTERM handler (or Python's SIGINT one) raises
        raise Interrupted() if stop == "SIGTERM" else KeyboardInterrupt()

    try:
        delivered = deliver_job_outputs(plan, hosts, job / "output", progress=stopped)
    except KeyboardInterrupt:  # a failure of this test, not a stop of the test run
        pytest.fail("Ctrl-C went past deliver_job_outputs: the checkpoints were not saved")
    assert delivered.stopped_by == stop and delivered.model_data is None
    assert (job / "output" / "model.tar.gz.partial").is_file()
    assert [p.name for p in (tmp_path / "ckpt").iterdir()] == ["step-1.pt"]
    assert deliver_job_outputs(plan, hosts, job / "output").stopped_by is None
