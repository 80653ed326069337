"""What a job object's conditions and its pods mean: hostile or odd cluster data (no conditions, both Complete and
Failed, a deleted object, non-ASCII digits in an index) reads as a state, never as a crash."""
from __future__ import annotations

from smdist_launcher.backends.kubernetes.status import host_of, pods_by_host, verdict
from smdist_launcher.backends.states import JobState


def _pod(name: str, *, label: str | None = None, rank: str | None = None) -> dict:
    labels = {"batch.kubernetes.io/job-completion-index": label} if label is not None else {}
    env = [{"name": "SMDIST_INDEX_ENV", "value": "PET_NODE_RANK"}, {"name": "PET_NODE_RANK", "value": rank}]
    return {"metadata": {"name": name, "labels": labels}, "spec": {"containers": [{"name": "node", "env": env}]}}


def test_conditions_read_as_states() -> None:
    assert verdict({"status": {}}).state is JobState.IN_PROGRESS
    both = {"status": {"conditions": [{"type": "Complete", "status": "True"},
                                      {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]}}
    assert verdict(both) == verdict({"status": {"conditions": both["status"]["conditions"][1:]}})
    assert verdict(both).state is JobState.FAILED
    assert verdict(None).state is JobState.FAILED and verdict(None, stopped_by_us=True).state is JobState.STOPPED
    suspended = {"status": {"conditions": [{"type": "Suspended", "status": "True", "reason": "JobSuspended"}]}}
    assert verdict(suspended).state is JobState.STOPPED


def test_an_index_that_is_not_ascii_digits_is_no_host() -> None:
    assert host_of(_pod("a", rank="\u00b2")) is None      # '²'.isdigit() is True, int('²') raises
    assert host_of(_pod("b", rank="\u0661")) is None      # Arabic-Indic one
    assert host_of(_pod("c", label="-1")) is None
    assert host_of(_pod("d", rank="1")) == "algo-2"
    assert list(pods_by_host([_pod("a", rank="\u00b2"), _pod("d", rank="1")])) == ["algo-2"]
