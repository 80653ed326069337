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


def test_what_was_delivered_before_a_later_failure_is_kept(tmp_path: Path) -> None:
    """The model was delivered, then the output archive (or the metrics) failed: the record keeps model_data (it was
    None: a delivered model the job's record no longer named)."""
    job = tmp_path / "job"
    plan = tiny_plan()
    hosts = {"algo-1": MLPaths(job / "hosts" / "algo-1" / "opt" / "ml")}
    hosts["algo-1"].model_dir.mkdir(parents=True)
    (hosts["algo-1"].model_dir / "weights.bin").write_bytes(b"w")
    (hosts["algo-1"].output_data_dir).mkdir(parents=True)
    (hosts["algo-1"].output_data_dir / "eval.json").write_text("{}")
    (job / "output" / "output.tar.gz.partial").mkdir(parents=True)  # the second archive cannot be written
    delivered = deliver_job_outputs(plan, hosts, job / "output")
    assert isinstance(delivered.error, OSError)
    assert delivered.model_data is not None and delivered.model_data.endswith("model.tar.gz")
    assert delivered.output_data is None


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


def test_every_backend_settles_a_jobs_end_from_its_delivery_alike() -> None:
    """Delivered.settle, what the local job and Slurm's finish both ask (Slurm's ignored a stop while packing: a
    `scancel` then read Failed)."""
    from smdist_launcher.backends.states import JobState
    from smdist_launcher.backends.toolkit.outputs import Delivered

    stop = Interrupted()
    stop.__cause__ = None
    failed = OSError(28, "No space left on device")
    assert Delivered().settle("Completed", "") == (JobState.COMPLETED, "")
    assert Delivered(error=failed).settle(JobState.COMPLETED, "", "packing failed") == (
        JobState.FAILED, "packing failed: [Errno 28] No space left on device")
    status, reason = Delivered(error=stop).settle("Completed", "")
    assert status is JobState.STOPPED and reason.startswith("stopped by SIGTERM while uploading outputs")
    assert Delivered(error=failed).settle("Failed", "rank 1 exited 3") == (JobState.FAILED, "rank 1 exited 3")

