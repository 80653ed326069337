"""What a job object's conditions and its pods mean for us: a JobState, the reason, the pods as hosts, the first
failing pod. Pure (dicts in, data out): cluster.py fetches, the backend decides what to print.

Conditions by kind (each with status "True" when it holds):
  TrainJob (Trainer v2): Complete, Failed, Suspended          JobSet: Completed, Failed, Suspended
  batch/v1 Job: Complete, Failed (reason DeadlineExceeded: past activeDeadlineSeconds), Suspended
  HyperPodPyTorchJob: Completed, Failed (its operator also sets Created/Running/Restarting; read as in progress)"""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..states import JobState

INDEX_ENV = "SMDIST_INDEX_ENV"   # render.INDEX_ENV (not imported: render pulls in the plan model)


class Condition(str, Enum):
    """Kubernetes condition types on the job objects (their operators' vocabulary, not our JobState)."""

    COMPLETE = "Complete"        # TrainJob, batch/v1 Job
    COMPLETED = "Completed"      # JobSet, HyperPodPyTorchJob
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"


class ConditionReason(str, Enum):
    """Reasons of a Failed condition that mean the job ran past its deadline (activeDeadlineSeconds)."""

    DEADLINE_EXCEEDED = "DeadlineExceeded"        # batch/v1 Job, JobSet
    MAX_RUNTIME_EXCEEDED = "MaxRuntimeExceeded"   # HyperPod's operator


class PodPhase(str, Enum):
    """A pod's status.phase (core/v1)."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


_DONE = {Condition.COMPLETE, Condition.COMPLETED, Condition.SUCCEEDED}
_DEADLINE_REASONS = set(ConditionReason)

# the label every operator puts on the pods it makes for a job, by the kind we created
POD_SELECTORS = {
    "TrainJob": "jobset.sigs.k8s.io/jobset-name={name}",   # the Trainer makes a JobSet named after the TrainJob
    "JobSet": "jobset.sigs.k8s.io/jobset-name={name}",
    "Job": "batch.kubernetes.io/job-name={name}",
    "HyperPodPyTorchJob": "smdist.io/job={name}",   # render.JOB_LABEL, on the replica template: the pods keep it
}
_INDEX_LABELS = ("batch.kubernetes.io/job-completion-index", "jobset.sigs.k8s.io/job-index")
_HOST = re.compile(r"^algo-[1-9][0-9]{0,5}$")
_INDEX = re.compile(r"^[0-9]{1,6}$")   # ASCII only: str.isdigit() takes '²', which int() refuses
HOST_LABEL = "smdist.aws/host"   # set by a rendered pod template that is one host's (HyperPod replica specs)


@dataclass(frozen=True)
class Verdict:
    state: JobState
    reason: str | None = None


def _holds(condition: dict[str, Any]) -> bool:
    return str(condition.get("status", "")).lower() == "true"


def verdict(obj: dict[str, Any] | None, *, stopped_by_us: bool = False) -> Verdict:
    """The job's state from its conditions. A job we suspended or deleted is Stopped (Stopping until the object
    says so); an object that is gone without our stop is Failed (someone deleted it)."""
    if obj is None:
        if stopped_by_us:
            return Verdict(JobState.STOPPED, "stopped (the objects were deleted)")
        return Verdict(JobState.FAILED, "the job's object is gone from the cluster (deleted outside smdist)")
    conditions = [c for c in (obj.get("status") or {}).get("conditions") or [] if _holds(c)]
    by_type = {c.get("type"): c for c in conditions}
    if Condition.FAILED in by_type:
        c = by_type[Condition.FAILED]
        why = ": ".join(x for x in (c.get("reason"), c.get("message")) if x) or Condition.FAILED.value
        state = JobState.MAX_RUNTIME_EXCEEDED if c.get("reason") in _DEADLINE_REASONS else JobState.FAILED
        return Verdict(state, why)
    if _DONE & by_type.keys():
        return Verdict(JobState.COMPLETED)
    if Condition.SUSPENDED in by_type:
        c = by_type[Condition.SUSPENDED]
        return Verdict(JobState.STOPPED, c.get("message") or c.get("reason") or "suspended")
    if stopped_by_us:
        return Verdict(JobState.STOPPING, "asked to stop; waiting for the cluster to suspend it")
    return Verdict(JobState.IN_PROGRESS)


def host_of(pod: dict[str, Any]) -> str | None:
    """Which of our hosts (algo-N) a pod runs: its host label, else its completion index + 1."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if _HOST.match(str(labels.get(HOST_LABEL, ""))):  # a host name becomes a file name: only algo-N is taken
        return str(labels[HOST_LABEL])
    for key in _INDEX_LABELS:
        value = labels.get(key) or annotations.get(key)
        if value is not None and _INDEX.match(str(value)):
            return f"algo-{int(value) + 1}"
    # HyperPod: the operator writes each pod's rank into its environment (the variable SMDIST_INDEX_ENV names)
    for box in (pod.get("spec") or {}).get("containers") or []:
        env = {e.get("name"): e.get("value") for e in box.get("env") or []}
        value = env.get(env.get(INDEX_ENV) or "")
        if value is not None and _INDEX.match(str(value)):
            return f"algo-{int(value) + 1}"
    return None


def pods_by_host(pods: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """algo-N -> its newest pod (a retried host has several), in host order; pods that are not hosts are left out."""
    found: dict[str, dict[str, Any]] = {}
    for pod in sorted(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or ""):
        host = host_of(pod)
        if host is not None:
            found[host] = pod
    return dict(sorted(found.items(), key=lambda kv: int(kv[0].rpartition("-")[2] or 0)))


def exit_code(pod: dict[str, Any]) -> int | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated is not None:
            return int(terminated.get("exitCode", 0))
    return None


def _finished_at(pod: dict[str, Any]) -> str:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated") or {}
        if terminated.get("finishedAt"):
            return str(terminated["finishedAt"])
    return "~"  # sorts after every timestamp


def first_failure(pods: list[dict[str, Any]]) -> str | None:
    """The pod that failed first, as one line: `pod P (algo-N) failed: exit code C (reason)`."""
    failed = [p for p in pods if (p.get("status") or {}).get("phase") == PodPhase.FAILED]
    if not failed:
        return None
    # the operator ends the other pods once one failed (exit 143/137): at the same second, the one that failed
    # by itself comes first
    pod = min(failed, key=lambda p: (_finished_at(p), exit_code(p) in (137, 143)))
    name = (pod.get("metadata") or {}).get("name")
    code = exit_code(pod)
    why = (pod.get("status") or {}).get("reason") or (pod.get("status") or {}).get("message")
    host = host_of(pod)
    return (f"pod {name}{f' ({host})' if host else ''} failed"
            f"{f': exit code {code}' if code is not None else ''}{f' ({why})' if why else ''}")
