"""Fixture: a factory of 2-host jobs whose runtimes are all killed at teardown."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from .hostjobs import Job

_counter = [0]


@pytest.fixture
def make_job(tmp_path: Path):
    jobs: list[Job] = []

    def _make(plan: dict[str, Any], script: str) -> Job:
        # A distinct 127.0.X.0/24 per job (per xdist worker too) so parallel tests never share addresses.
        _counter[0] += 1
        worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
        job = Job(tmp_path / f"job{_counter[0]}", plan, script, 10 + worker * 50 + _counter[0] % 50)
        jobs.append(job)
        return job

    yield _make
    for job in jobs:
        job.kill()
