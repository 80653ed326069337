"""Placements see a PlacementJob (what to start, for which job, the record's facts they add to), never the job."""
from __future__ import annotations

from pathlib import Path

from smdist_launcher.backends.local.placement import HostStart, PlacementJob, ProcessPlacement
from smdist_launcher.contract import MLPaths

from ..plans import tiny_plan


def test_the_process_placement_starts_the_runtime_as_given(tmp_path: Path) -> None:
    job = PlacementJob(job_id="tiny-1", job_root=tmp_path, plan=tiny_plan(), environ={}, tmp_root=tmp_path / "tmp",
                       hosts={}, backend_info={})
    placement = ProcessPlacement()
    placement.setup(job)
    start = HostStart("algo-1", MLPaths(tmp_path / "algo-1"), {"A": "1"}, tmp_path, ["python", "-m", "x"])
    launch = placement.launch(job, start)
    assert (launch.host, launch.argv, launch.env, launch.user) == ("algo-1", ["python", "-m", "x"], {"A": "1"}, None)
    placement.teardown(job)
    assert job.hosts == {} and job.backend_info == {}
