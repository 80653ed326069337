"""Every example's CreateTrainingJob request is pinned next to its plan (plans/request.json), like the plans.

Update after an intended change: pytest tests/backends/sagemaker/test_example_requests.py --plan-snapshot-update
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from smdist_launcher.estimators import estimator_from_job_file
from smdist_launcher.plan import snapshot

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
NAMES = sorted(p.parents[1].name for p in EXAMPLES.glob("*/plans/job.json"))
REGION = "us-west-2"  # a fixed region makes image URIs concrete; the account stays <account>


def render(name: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = estimator_from_job_file(str(EXAMPLES / name / "job.yaml"))
    return json.dumps(est.request(region=REGION), indent=2) + "\n"


@pytest.mark.parametrize("name", NAMES)
def test_request_matches_the_pinned_file(name: str, request: pytest.FixtureRequest) -> None:
    pinned = EXAMPLES / name / "plans" / "request.json"
    rendered = render(name)
    if request.config.getoption("--plan-snapshot-update"):
        snapshot.write(rendered, pinned)
    result = snapshot.check(rendered, pinned)
    assert result.matches, result.message()


def test_every_example_has_a_request() -> None:
    assert NAMES and all((EXAMPLES / n / "plans" / "request.json").is_file() for n in NAMES)
