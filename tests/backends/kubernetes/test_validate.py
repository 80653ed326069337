"""Bad objects are refused the way the cluster would refuse them, before anything is sent: wrong types, unknown
fields, the Trainer webhook's reserved PET_* env, names the CRD's CEL rule / core validation refuse; every problem
with its `Kind/name: key.path`. The objects start from the pinned dry runs (test_render.py checks those are valid)."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from smdist_launcher.backends import registry
from smdist_launcher.backends.api import Submission
from smdist_launcher.backends.kubernetes.validate import problems, validate_manifests
from smdist_launcher.errors import ValidationError

from ..plans import tiny_plan
from . import hyperpod_env

PLANS = Path(__file__).resolve().parents[3] / "examples" / "torch_distributed" / "plans"


def pinned(flavour: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((PLANS / f"k8s-job-{flavour}.yaml").read_text()))


def paths_of(obj: dict[str, Any], schema: dict[str, Any] | None = None) -> dict[str, str]:
    return {e.path: e.message for e in problems(obj, hyperpod_schema=schema)}


def test_a_trainjob_with_wrong_types_unknown_fields_reserved_env_and_a_bad_name_is_refused() -> None:
    (job,) = copy.deepcopy(pinned("trainjob"))
    job["metadata"]["name"] = "2-torch"
    job["spec"]["trainer"]["numProcPerNode"] = "8"                      # an integer in v2.3.0
    job["spec"]["trainer"]["nodes"] = 2                                  # not a field
    job["spec"]["trainer"]["env"].append({"name": "PET_MASTER_PORT", "value": "29400"})
    found = paths_of(job)
    where = "TrainJob/2-torch"
    assert set(found) == {f"{where}: metadata.name", f"{where}: spec.trainer.numProcPerNode",
                          f"{where}: spec.trainer.nodes", f"{where}: spec.trainer.env[3].name"}
    assert "RFC 1035" in found[f"{where}: metadata.name"]
    assert found[f"{where}: spec.trainer.numProcPerNode"] == "must be an integer"
    assert found[f"{where}: spec.trainer.nodes"].startswith("unknown field (allowed: args, command, env, image, ")
    assert "torch plugin sets" in found[f"{where}: spec.trainer.env[3].name"]


def test_names_too_long_for_the_pods_host_names_are_refused() -> None:
    (jobset,) = copy.deepcopy(pinned("jobset"))
    jobset["metadata"]["name"] = "a" * 60          # a valid label, but a-…-node-0-1 is not
    (message,) = paths_of(jobset).values()
    assert "the pods' host names" in message and "at most 63 characters" in message
    (job,) = copy.deepcopy(pinned("trainjob"))
    job["metadata"]["name"] = "a" * 64
    assert "must be at most 63 characters (it has 64)" in paths_of(job)[f"TrainJob/{'a' * 64}: metadata.name"]
    _service, indexed = copy.deepcopy(pinned("job"))
    indexed["metadata"]["name"] = "a" * 62           # the Job controller names its pods' hosts a…a-<index>: 64
    (message,) = paths_of(indexed).values()
    assert "(e.g. " + "a" * 62 + "-1)" in message and "use a job name of at most 61" in message


def test_a_jobset_pod_template_is_checked_to_the_leaves() -> None:
    (jobset,) = copy.deepcopy(pinned("jobset"))
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["env"][0]["valeu"] = "x"
    pod["restartPolicy"] = 1
    where = "JobSet/torch-distributed: spec.replicatedJobs[0].template.spec.template.spec"
    assert set(paths_of(jobset)) == {f"{where}.containers[0].env[0].valeu", f"{where}.restartPolicy"}


def test_core_kinds_use_kubernetes_strict_schemas() -> None:
    service, job = copy.deepcopy(pinned("job"))
    service["spec"]["clusterIp"] = "None"                                # the field is clusterIP
    job["spec"]["completions"] = "2"
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = [8]
    assert set(paths_of(service)) == {"Service/torch-distributed: spec.clusterIp"}
    assert set(paths_of(job)) == {
        "Job/torch-distributed: spec.completions",
        "Job/torch-distributed: spec.template.spec.containers[0].resources.limits.nvidia.com/gpu"}
    service["metadata"]["name"] = "1svc"                                 # a Service name is an RFC 1035 label
    assert "Service/1svc: metadata.name" in paths_of(service)


def test_a_hyperpod_job_is_checked_against_the_sdks_own_model() -> None:
    schema = hyperpod_env.schema()
    (job,) = copy.deepcopy(pinned("hyperpod"))
    job["spec"]["nprocPerNode"] = 8                                      # a string in the SDK's model
    job["spec"]["runPolicy"]["jobMaxRetries"] = 3                        # the field is jobMaxRetryCount
    job["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"][0]["value"] = 1
    where = "HyperPodPyTorchJob/torch-distributed: spec"
    assert set(paths_of(job, schema)) == {f"{where}.nprocPerNode", f"{where}.runPolicy.jobMaxRetries",
                                          f"{where}.replicaSpecs[0].template.spec.containers[0].env[0].value"}


def test_every_problem_of_every_object_is_reported_at_once() -> None:
    objects = copy.deepcopy(pinned("job"))
    objects[0]["spec"]["bogus"] = 1
    objects[1]["spec"]["bogus"] = 1
    with pytest.raises(ValidationError) as info:
        validate_manifests(objects)
    assert [e.path for e in info.value.errors] == ["Service/torch-distributed: spec.bogus",
                                                   "Job/torch-distributed: spec.bogus"]
    assert problems({"kind": "Pod", "metadata": {"name": "x"}})[0].path == "Pod/x: kind"


def test_submit_refuses_an_invalid_object_before_any_api_call(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """No cluster is configured: the refusal is the validator's, not a connection error."""
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
    backend = registry.get("kubernetes")
    with pytest.raises(ValidationError) as info:
        backend.dryrun(Submission(plan=tiny_plan(2, job_name="Tiny.Job")), {"flavour": "trainjob"})
    assert [e.path for e in info.value.errors] == ["TrainJob/tiny.job: metadata.name"]


@pytest.mark.parametrize("flavour", ["trainjob", "jobset", "hyperpod", "job"])
def test_secret_env_names_that_are_no_env_name_or_secret_key_are_refused_at_the_dry_run(flavour: str) -> None:
    """A secret variable becomes a secretKeyRef env of every pod and a key of the job's Secret: names the API server
    refuses (a space, a '/', a leading digit) are refused here with their key path, and the value never shown."""
    plan = tiny_plan(2, environment={"my token": "hunter2", "1_API_KEY": "hunter3", "OK_TOKEN": "fine"})
    with pytest.raises(ValidationError) as info:
        registry.get("kubernetes").dryrun(Submission(plan=plan), {"flavour": flavour})
    found = {(e.path.rpartition(".")[2], e.value) for e in info.value.errors}
    assert found == {("name", "my token"), ("key", "my token"), ("name", "1_API_KEY")}
    assert "hunter" not in str(info.value)


def test_an_env_value_too_long_for_exec_is_refused_with_its_path() -> None:
    """The plan travels in SMDIST_PLAN_JSON (~600 bytes a host): past Linux's 128 KiB for one environment string
    (a few hundred hosts) the container cannot start (E2BIG), so the dry run says so instead."""
    (job,) = copy.deepcopy(pinned("jobset"))
    env = job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"]
    env[0]["value"] = "x" * 131072
    (path,) = paths_of(job)
    assert path.endswith(".containers[0].env[0].value") and "131072 bytes" in paths_of(job)[path]
    env[0]["value"] = "x" * (131072 - len(env[0]["name"]) - 2)   # NAME=value and its NUL: just fits
    assert paths_of(job) == {}
