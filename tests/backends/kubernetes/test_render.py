"""The kubernetes backend's dry run: every example job rendered for every flavour, valid against the targets'
schemas and pinned in examples/*/plans/ (`smdist plan JOB --dryrun --backend kubernetes --flavour F --check PIN`);
MPI and heterogeneous plans refused with the reason; the plan's topology carried, never re-derived."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from smdist_launcher.backends import registry
from smdist_launcher.backends.api import RunPolicy, Submission
from smdist_launcher.backends.kubernetes.options import FLAVOURS, KubernetesOptions
from smdist_launcher.backends.kubernetes.render import render_manifests
from smdist_launcher.backends.kubernetes.validate import validate_manifests
from smdist_launcher.cli.main import main
from smdist_launcher.errors import ValidationError

from ..plans import tiny_plan
from . import hyperpod_env

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
# The example jobs the backend renders (torchrun / python launchers); the others are refused below.
RENDERED = ["mnist/job_torch_distributed.yaml", "parameter_server/job.yaml", "smp/job_v2.yaml", "smp_v2/job.yaml",
            "torch_distributed/job.yaml", "trn1/job.yaml"]
REFUSED = {"heterogeneous/job.yaml": "instance_groups", "mnist/job_mpi.yaml": "distribution",
           "mnist/job_pytorchddp.yaml": "distribution", "mpi/job.yaml": "distribution",
           "pytorchddp/job.yaml": "distribution", "smddp/job_dataparallel.yaml": "distribution",
           "smddp/job_pytorchddp.yaml": "distribution", "smddp_p4d/job.yaml": "distribution",
           "smp/job_v1_tp.yaml": "distribution", "smp/job_v1_tp_pp.yaml": "distribution",
           "smp_v1_tp/job.yaml": "distribution", "smp_v1_tp_pp/job.yaml": "distribution"}


def pin_of(job: str, flavour: str) -> Path:
    folder, _, name = job.partition("/")
    return EXAMPLES / folder / "plans" / f"k8s-{Path(name).stem}-{flavour}.yaml"


def test_every_example_job_is_rendered_or_refused() -> None:
    assert sorted([*RENDERED, *REFUSED]) == sorted(str(p.relative_to(EXAMPLES)) for p in EXAMPLES.glob("*/job*.yaml"))


@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("job", RENDERED)
def test_example_dry_runs_are_valid_and_pinned(job: str, flavour: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(EXAMPLES / job), "--dryrun", "--backend", "kubernetes", "--flavour", flavour,
                 "--check", str(pin_of(job, flavour))]) == 0, capsys.readouterr().out
    objects = list(yaml.safe_load_all(pin_of(job, flavour).read_text()))
    validate_manifests(objects, hyperpod_schema=hyperpod_env.schema())   # the HyperPod SDK's own model too


@pytest.mark.parametrize("job", sorted(REFUSED))
def test_mpi_and_heterogeneous_plans_are_refused_with_the_reason(job: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(EXAMPLES / job), "--dryrun", "--backend", "kubernetes"]) != 0
    out = capsys.readouterr()
    assert f"{REFUSED[job]}: " in out.out + out.err


def _render(flavour: str, attempts: int | None = 3, **plan: Any) -> list[dict[str, Any]]:
    submission = Submission(plan=tiny_plan(3, **plan), policy=RunPolicy(max_retry_attempts=attempts))
    options = KubernetesOptions.model_validate({
        "flavour": flavour, "image": "registry.example/smdist:1", "namespace": "team-a", "service_account": "trainer",
        "node_selector": {"pool": "gpu"}, "image_pull_secrets": ["regcred"], "gpus_per_node": 4})
    return render_manifests(submission, options)


def _pod_spec(flavour: str, obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]
    if flavour == "jobset":
        return dict(spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"])
    if flavour == "hyperpod":
        return dict(spec["replicaSpecs"][0]["template"]["spec"])
    return dict(spec["template"]["spec"])


@pytest.mark.parametrize("flavour", ["jobset", "hyperpod", "job"])
def test_every_host_is_one_pod_running_its_part_of_the_plan(flavour: str) -> None:
    """Options reach every pod; the plan (its hosts' argv: the topology) travels unchanged but for where channels
    and code are fetched from; GPUs per node come from the options (else the instance catalog)."""
    objects = _render(flavour, None, channels={"train": "s3://data/train", "local": "/tmp/x"})
    pod = _pod_spec(flavour, objects[-1])
    assert pod["serviceAccountName"] == "trainer" and pod["nodeSelector"] == {"pool": "gpu"}
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    (box,) = pod["containers"]
    assert box["image"] == "registry.example/smdist:1"
    assert box["command"] == ["python3", "-m", "smdist_launcher.backends.kubernetes.pod"]
    assert box["resources"] == {"limits": {"nvidia.com/gpu": "4"}}
    env = {e["name"]: e["value"] for e in box["env"]}
    plan = json.loads(env["SMDIST_PLAN_JSON"])
    assert [h["argv"] for h in plan["hosts"]] == [h.argv for h in tiny_plan(3).hosts]
    assert plan["channels"]["train"]["uri"] == "s3://data/train"
    assert plan["channels"]["local"]["uri"] == "s3://<bucket>/tiny/input/local"
    assert json.loads(plan["sagemaker_hyperparameters"]["sagemaker_submit_directory"]) == \
        "s3://<bucket>/tiny/source/sourcedir.tar.gz"
    replicas = {"jobset": lambda o: o["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"],
                "hyperpod": lambda o: o["spec"]["replicaSpecs"][0]["replicas"],
                "job": lambda o: o["spec"]["completions"]}[flavour]
    assert replicas(objects[-1]) == 3


def test_each_flavour_follows_its_targets_conventions() -> None:
    (trainjob,) = render_manifests(Submission(plan=tiny_plan(2, processes_per_host=4)),
                                   KubernetesOptions(node_selector={"pool": "gpu"}))
    trainer = trainjob["spec"]["trainer"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (2, 4)
    assert not any(e["name"].startswith("PET_") for e in trainer["env"])   # the torch plugin's own
    assert trainjob["spec"]["runtimeRef"]["name"] == "torch-distributed"
    patched = trainjob["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    assert patched["template"]["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "gpu"}
    (hyperpod,) = _render("hyperpod")
    assert hyperpod["spec"]["nprocPerNode"] == "1" and hyperpod["spec"]["runPolicy"]["jobMaxRetryCount"] == 2
    (jobset,) = _render("jobset")
    assert jobset["spec"]["failurePolicy"] == {"maxRestarts": 2}
    assert jobset["spec"]["network"]["enableDNSHostnames"] is True
    service, job = render_manifests(Submission(plan=tiny_plan(2)), KubernetesOptions(flavour="job"))
    assert service["kind"] == "Service" and service["spec"]["clusterIP"] == "None"
    assert job["spec"]["completionMode"] == "Indexed" and job["spec"]["template"]["spec"]["subdomain"] == "tiny"


@pytest.mark.parametrize("flavour", ["trainjob", "job"])
def test_retries_are_refused_where_the_flavour_has_no_such_concept(flavour: str) -> None:
    with pytest.raises(ValidationError) as info:
        _render(flavour)
    assert [e.path for e in info.value.errors] == ["max_retry_attempts"]
    assert "use --flavour jobset or hyperpod" in info.value.errors[0].message


def test_the_dry_run_is_deterministic_and_validated_before_it_is_returned() -> None:
    backend = registry.get("kubernetes")
    submission = Submission(plan=tiny_plan(2))
    first = backend.dryrun(submission, {"flavour": "jobset"}).render()
    assert first == backend.dryrun(submission, {"flavour": "jobset"}).render()
    with pytest.raises(ValidationError) as info:   # a name the API server would refuse, caught here
        backend.dryrun(Submission(plan=tiny_plan(2, job_name="9lives")), {"flavour": "trainjob"})
    assert [e.path for e in info.value.errors] == ["TrainJob/9lives: metadata.name"]
    with pytest.raises(ValidationError) as bad:
        backend.dryrun(submission, {"flavour": "mesos", "namespace": "Team_A"})
    assert sorted(e.path for e in bad.value.errors) == ["kubernetes.flavour", "kubernetes.namespace"]


def test_sharded_channels_are_refused_rather_than_replicated() -> None:
    from smdist_launcher.plan.model import Channel

    with pytest.raises(ValidationError) as info:
        _render("jobset", None, channels={"train": Channel(uri="s3://b/train", distribution="ShardedByS3Key")})
    assert [e.path for e in info.value.errors] == ["inputs.train.distribution"]


def test_channel_names_that_are_no_folder_name_are_refused() -> None:
    """A plan made in Python skips the jobspec's channel check; the name becomes an S3 key and the pods' folder."""
    with pytest.raises(ValidationError) as info:
        _render("jobset", None, channels={"../up": "s3://b/x", "..": "s3://b/y", "a/b": "s3://b/z", "ok": "s3://b/k"})
    assert sorted(e.path for e in info.value.errors) == ["inputs...", "inputs.../up", "inputs.a/b"]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_secrets_are_rendered_as_references_and_sent_only_as_the_secret(flavour: str) -> None:
    from smdist_launcher.backends.kubernetes.backend import manifests_yaml
    from smdist_launcher.backends.kubernetes.render import secret_object

    plan = tiny_plan(2, environment={"HF_TOKEN": "env-value-41", "MODE": "fast"},
                     hyperparameters={"api_token": "hp-value-42", "epochs": 1})
    submission, options = Submission(plan=plan), KubernetesOptions(flavour=flavour)
    objects = render_manifests(submission, options)
    validate_manifests(objects, hyperpod_schema=hyperpod_env.schema())   # valueFrom is valid in every target
    text = manifests_yaml(objects)
    assert "env-value-41" not in text and "hp-value-42" not in text
    box = _pod_spec(flavour, objects[-1])["containers"][0] if flavour != "trainjob" else objects[0]["spec"]["trainer"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in box["env"] if "valueFrom" in e}
    assert refs == {"HF_TOKEN": {"name": "tiny-secrets", "key": "HF_TOKEN"},
                    "SMDIST_SECRET_HYPERPARAMETERS": {"name": "tiny-secrets", "key": "SMDIST_SECRET_HYPERPARAMETERS"}}
    secret = secret_object(submission, options)
    assert secret is not None and secret["metadata"]["name"] == "tiny-secrets"
    assert secret["stringData"] == {"HF_TOKEN": "env-value-41",
                                    "SMDIST_SECRET_HYPERPARAMETERS": json.dumps({"api_token": '"hp-value-42"'})}
    assert secret_object(Submission(plan=tiny_plan(2)), options) is None
