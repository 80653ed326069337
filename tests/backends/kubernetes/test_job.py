"""The backend's describe / stop / logs on a recorded job (backends/kubernetes/job.py) against the API emulator,
without pods: stop suspends the object and the record says Stopping, then Stopped once the operator's Suspended
condition is there; the record keeps that state; a job whose object is gone (deleted outside smdist) is Failed."""
from __future__ import annotations

from pathlib import Path

import pytest

from smdist_launcher.backends.api import JobHandle
from smdist_launcher.backends.kubernetes.backend import KubernetesBackend
from smdist_launcher.backends.states import JobState
from smdist_launcher.backends.toolkit.jobdir import JobDir
from smdist_launcher.backends.toolkit.records import JobRecord

from .test_cluster import set_conditions, trainjob

NS = "cluster-test"


def _recorded(root: Path, name: str, kubeconfig: Path, objects: list[list[str]] | None = None) -> JobHandle:
    job_dir = JobDir.create(root, name)
    JobRecord(job_name=name, job_id=name, job_dir=str(job_dir.root), backend="kubernetes", launcher_pid=0,
              backend_info={"namespace": NS, "kind": "TrainJob", "name": name, "kubeconfig": str(kubeconfig),
                            "context": None, "stopped": False, "output_path": None,
                            "objects": objects or [["TrainJob", name]]}).save(job_dir.record_file)
    return JobHandle(backend="kubernetes", job_name=name, job_dir=str(job_dir.root))


def test_stop_suspends_and_the_record_follows(cluster, k8s_emulator, tmp_path) -> None:
    backend = KubernetesBackend()
    cluster.create(trainjob("to-stop"), NS)
    handle = _recorded(tmp_path, "to-stop", k8s_emulator.kubeconfig)
    assert backend.describe(handle).state is JobState.IN_PROGRESS

    assert "suspend TrainJob/to-stop" in backend.stop(handle)
    assert cluster.get("TrainJob", "to-stop", NS)["spec"]["suspend"] is True
    assert backend.describe(handle).state is JobState.STOPPING   # the operator has not suspended it yet
    set_conditions(cluster, "to-stop", ("Suspended", "Suspended"))
    assert backend.describe(handle).state is JobState.STOPPED
    cluster.delete("TrainJob", "to-stop", NS)
    assert backend.describe(handle).state is JobState.STOPPED  # final: read from the record
    record = JobRecord.load(JobDir(Path(handle.job_dir)).record_file)
    assert record.status == JobState.STOPPED and record.ended is not None


def test_an_object_deleted_outside_smdist_fails_the_job(cluster, k8s_emulator, tmp_path) -> None:
    cluster.create(trainjob("deleted"), NS)
    handle = _recorded(tmp_path, "deleted", k8s_emulator.kubeconfig)
    cluster.delete("TrainJob", "deleted", NS)
    status = KubernetesBackend().describe(handle)
    assert status.state is JobState.FAILED and "deleted outside smdist" in (status.reason or "")


def test_a_refused_workload_takes_back_the_secret_created_before_it(cluster, k8s_emulator) -> None:
    """The Secret is created first; when the workload is refused no record names it, so it must not stay behind
    holding the job's secret values."""
    from smdist_launcher.backends.kubernetes.job import create_all

    ns = "rollback-test"   # its own namespace: other tests watch every TrainJob of NS
    cluster.create(trainjob("taken"), ns)   # the name is in use: the second create is refused (409)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "taken-secrets", "namespace": ns},
              "type": "Opaque", "stringData": {"HF_TOKEN": "v"}}
    with pytest.raises(RuntimeError, match="409"):
        create_all(cluster, [secret, trainjob("taken")], ns)
    assert cluster.get("Secret", "taken-secrets", ns) is None
    assert cluster.get("TrainJob", "taken", ns) is not None   # what was there before is left alone
    cluster.delete("TrainJob", "taken", ns)


def test_the_secret_belongs_to_its_workload_and_goes_when_the_job_ends(cluster, k8s_emulator, tmp_path) -> None:
    """The workload owns its Secret (deleting the workload deletes the values), and smdist deletes the Secret once
    it sees the job end: an ended TrainJob may stay for days for its conditions; the values need not."""
    from smdist_launcher.backends.kubernetes.job import create_all, own_secret

    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ending-secrets", "namespace": NS},
              "type": "Opaque", "stringData": {"HF_TOKEN": "v"}}
    created = create_all(cluster, [secret, trainjob("ending")], NS)
    own_secret(cluster, "ending-secrets", NS, created[-1])
    refs = cluster.get("Secret", "ending-secrets", NS)["metadata"]["ownerReferences"]
    assert refs == [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "ending",
                     "uid": created[-1]["metadata"]["uid"]}]

    handle = _recorded(tmp_path, "ending", k8s_emulator.kubeconfig, [["Secret", "ending-secrets"],
                                                                     ["TrainJob", "ending"]])
    backend = KubernetesBackend()
    assert backend.describe(handle).state is JobState.IN_PROGRESS
    assert cluster.get("Secret", "ending-secrets", NS) is not None   # the pods still read it
    set_conditions(cluster, "ending", ("Failed", "BackoffLimitExceeded"))
    assert backend.describe(handle).state is JobState.FAILED
    assert cluster.get("Secret", "ending-secrets", NS) is None
    assert cluster.get("TrainJob", "ending", NS) is not None          # the workload and its conditions stay
    cluster.delete("TrainJob", "ending", NS)
