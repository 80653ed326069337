"""The backend's cluster calls (backends/kubernetes/cluster.py, status.py) through the official `kubernetes` client
against the API emulator: create, get, watch, status conditions → JobState, suspend, delete, and an invalid object
refused by the API server with a 422 whose causes name our key path."""
from __future__ import annotations

import pytest

from smdist_launcher.backends.kubernetes.status import first_failure, pods_by_host, verdict
from smdist_launcher.backends.states import JobState
from smdist_launcher.errors import ValidationError

NS = "cluster-test"  # its own namespace: the emulator is shared with the emulated-pods tests


def trainjob(name: str, env: list[dict[str, str]] | None = None) -> dict:
    trainer: dict = {"image": "smdist:latest", "numNodes": 2, "command": ["smdist-train"]}
    if env is not None:
        trainer["env"] = env
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer}}


def set_conditions(cluster, name: str, *conditions: tuple[str, str]) -> None:
    """What the Trainer's controller does: the status subresource, through the client."""
    body = {"status": {"conditions": [{"type": t, "status": "True", "reason": r, "message": f"{t}: {r}"}
                                      for t, r in conditions]}}
    cluster.custom.patch_namespaced_custom_object_status("trainer.kubeflow.org", "v1alpha1", NS, "trainjobs",
                                                         name, body)


def test_create_get_watch_conditions_suspend_delete(cluster) -> None:
    created = cluster.create(trainjob("mnist-a"), NS)
    assert created["metadata"]["uid"] and created["metadata"]["namespace"] == NS
    with pytest.raises(RuntimeError, match="409"):  # the name is taken: AlreadyExists, not a silent replace
        cluster.create(trainjob("mnist-a"), NS)

    got = cluster.get("TrainJob", "mnist-a", NS)
    assert got is not None and got["spec"]["trainer"]["numNodes"] == 2
    assert verdict(got).state is JobState.IN_PROGRESS

    set_conditions(cluster, "mnist-a", ("Complete", "JobSetCompleted"))
    events = []
    for kind, obj in cluster.watch("TrainJob", NS, timeout_s=5):  # no version: ADDED for what exists now
        events.append((kind, obj["metadata"]["name"]))
        if verdict(obj).state.is_terminal:
            break
    assert events == [("ADDED", "mnist-a")]
    assert verdict(cluster.get("TrainJob", "mnist-a", NS)).state is JobState.COMPLETED

    # a watch from a resourceVersion sees the changes after it: suspend (spec) then the controller's condition
    since = cluster.get("TrainJob", "mnist-a", NS)["metadata"]["resourceVersion"]
    cluster.suspend("TrainJob", "mnist-a", NS)
    set_conditions(cluster, "mnist-a", ("Suspended", "Suspended"))
    from kubernetes import watch

    seen = []
    for event in watch.Watch().stream(cluster.custom.list_namespaced_custom_object, "trainer.kubeflow.org",
                                      "v1alpha1", NS, "trainjobs", resource_version=since, timeout_seconds=5):
        seen.append((event["type"], event["object"]["spec"].get("suspend"),
                     [c["type"] for c in (event["object"].get("status") or {}).get("conditions", [])]))
        if len(seen) == 2:
            break
    assert seen == [("MODIFIED", True, ["Complete"]), ("MODIFIED", True, ["Suspended"])]
    assert verdict(cluster.get("TrainJob", "mnist-a", NS)).state is JobState.STOPPED

    assert cluster.delete("TrainJob", "mnist-a", NS) is True
    assert cluster.get("TrainJob", "mnist-a", NS) is None
    assert cluster.delete("TrainJob", "mnist-a", NS) is False
    assert verdict(None, stopped_by_us=True).state is JobState.STOPPED


def test_failed_conditions_and_the_first_failing_pod(cluster) -> None:
    cluster.create(trainjob("mnist-f"), NS)
    set_conditions(cluster, "mnist-f", ("Failed", "JobSetFailed"))
    v = verdict(cluster.get("TrainJob", "mnist-f", NS))
    assert v.state is JobState.FAILED and "JobSetFailed" in (v.reason or "")

    # two pods of the JobSet, as its controller labels them; the one that ended first is named
    for index, (phase, code, at) in enumerate([("Failed", 3, "2026-11-27T10:00:05Z"),
                                               ("Failed", 137, "2026-11-27T10:00:01Z")]):
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"mnist-f-node-0-{index}", "labels": {
                   "jobset.sigs.k8s.io/jobset-name": "mnist-f",
                   "batch.kubernetes.io/job-completion-index": str(index)}},
               "spec": {"containers": [{"name": "node", "image": "smdist:latest"}]}}
        cluster.create(pod, NS)
        status = {"phase": phase, "containerStatuses": [{"name": "node", "state": {"terminated": {
            "exitCode": code, "finishedAt": at}}}]}
        cluster.core.replace_namespaced_pod_status(f"mnist-f-node-0-{index}", NS,
                                                   {**pod, "status": status}, _preload_content=False)
    pods = cluster.pods(NS, "jobset.sigs.k8s.io/jobset-name=mnist-f")
    assert list(pods_by_host(pods)) == ["algo-1", "algo-2"]
    assert first_failure(pods) == "pod mnist-f-node-0-1 (algo-2) failed: exit code 137"
    assert cluster.pods(NS, "jobset.sigs.k8s.io/jobset-name=other") == []


def test_an_invalid_object_is_refused_with_422_and_our_key_path(cluster) -> None:
    bad = trainjob("mnist-bad", env=[{"name": "PET_NNODES", "value": "2"}])  # the Trainer's webhook refuses it
    with pytest.raises(ValidationError) as caught:
        cluster.create(bad, NS)
    text = str(caught.value)
    assert "TrainJob/mnist-bad" in text and "spec.trainer.env" in text and "PET_NNODES" in text
    assert cluster.get("TrainJob", "mnist-bad", NS) is None  # nothing stored
