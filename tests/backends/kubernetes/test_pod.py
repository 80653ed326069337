"""What each rendered pod runs: its index picks its host, the plan's host names map to the pods' DNS names, the
/opt/ml tree is the SageMaker one, and smdist-train runs that host (the emulated-pods tests run it end to end)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from smdist_launcher.backends.api import Submission
from smdist_launcher.backends.kubernetes.options import KubernetesOptions
from smdist_launcher.backends.kubernetes.pod import host_launch
from smdist_launcher.backends.kubernetes.render import render_manifests

from ..plans import tiny_plan


def _pod_env(flavour: str) -> dict[str, str]:
    objects = render_manifests(Submission(plan=tiny_plan(3)), KubernetesOptions(flavour=flavour, namespace="ns"))
    spec = objects[-1]["spec"]
    box = {"trainjob": lambda: spec["trainer"],
           "jobset": lambda: spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0],
           "hyperpod": lambda: spec["replicaSpecs"][0]["template"]["spec"]["containers"][0],
           "job": lambda: spec["template"]["spec"]["containers"][0]}[flavour]()
    return {e["name"]: e["value"] for e in box["env"]}


def test_a_pod_becomes_the_host_its_index_names(tmp_path: Path) -> None:
    env = {**_pod_env("job"), "JOB_COMPLETION_INDEX": "1", "PATH": "/usr/bin"}
    argv, run_env, host = host_launch(env, tmp_path / "opt" / "ml", tmp_path / "staging")
    assert host == "algo-2"
    assert argv[1:] == ["-m", "smdist_launcher.container", "--root", str(tmp_path / "opt" / "ml"), "--host", "algo-2",
                        "--plan", str(tmp_path / "opt" / "ml" / "input" / "config" / "launchplan.json")]
    assert json.loads(run_env["SMDIST_HOST_MAP"]) == {f"algo-{i + 1}": f"tiny-{i}.tiny.ns.svc" for i in range(3)}
    config = json.loads((tmp_path / "opt" / "ml" / "input" / "config" / "resourceconfig.json").read_text())
    assert config["current_host"] == "algo-2" and config["hosts"] == ["algo-1", "algo-2", "algo-3"]
    assert "SMDIST_PLAN_JSON" not in run_env


def test_trainjob_pods_use_jobset_host_names_and_hyperpod_pods_the_operators_master(tmp_path: Path) -> None:
    env = {**_pod_env("trainjob"), "JOB_COMPLETION_INDEX": "0"}
    _argv, run_env, _host = host_launch(env, tmp_path / "a", tmp_path / "s1")
    assert json.loads(run_env["SMDIST_HOST_MAP"])["algo-1"] == "tiny-node-0-0.tiny.ns.svc"
    env = {**_pod_env("hyperpod"), "PET_NODE_RANK": "2", "MASTER_ADDR": "10.0.0.7"}
    _argv, run_env, host = host_launch(env, tmp_path / "b", tmp_path / "s2")
    assert host == "algo-3" and json.loads(run_env["SMDIST_HOST_MAP"]) == {"algo-1": "10.0.0.7"}


@pytest.mark.parametrize("raw", ["3", "99", "-1", "x", "", " 1", "1\n", "\u00b2", "\u0661", "1_0"])
def test_a_pod_without_a_valid_index_says_which_variable(raw: str, tmp_path: Path) -> None:
    """Only ASCII digits within the plan's hosts: `²` and Arabic-Indic `١` pass str.isdigit() (one crashed int(),
    the other became host algo-2)."""
    expected = rf"\$JOB_COMPLETION_INDEX must be a host index 0..2 \(got {re.escape(repr(raw))}\)"
    with pytest.raises(SystemExit, match=expected):
        host_launch({**_pod_env("jobset"), "JOB_COMPLETION_INDEX": raw}, tmp_path / "ml", tmp_path / "s")


def test_a_pod_fetches_channels_and_checkpoints_from_s3_and_the_first_host_delivers_the_model(tmp_path: Path,
                                                                                              s3) -> None:
    """The S3 side of the SageMaker contract, per pod (a real moto S3 server): channels and checkpoints in before
    the host starts; after it, checkpoints out from every host, model.tar.gz from the first host only."""
    import io
    import tarfile

    from smdist_launcher.backends.kubernetes.pod import deliver, prepare
    from smdist_launcher.plan.model import Channel

    bucket = s3.bucket
    s3.put_object(Bucket=bucket, Key="data/train/part-0.csv", Body=b"1,2\n")
    s3.put_object(Bucket=bucket, Key="ckpt/step-1.pt", Body=b"weights")
    plan = tiny_plan(2, channels={"train": Channel(uri=f"s3://{bucket}/data/train")},
                     output_path=f"s3://{bucket}/out", checkpoint_s3_uri=f"s3://{bucket}/ckpt")
    objects = render_manifests(Submission(plan=plan), KubernetesOptions(flavour="job"))
    env = {e["name"]: e["value"] for e in objects[-1]["spec"]["template"]["spec"]["containers"][0]["env"]}
    for index in ("0", "1"):   # algo-2 last: its model must not replace the first host's
        pod = prepare({**env, "JOB_COMPLETION_INDEX": index}, tmp_path / index / "ml", tmp_path / index / "staging")
        assert (pod.paths.root / "input" / "data" / "train" / "part-0.csv").read_bytes() == b"1,2\n"
        assert (pod.paths.root / "checkpoints" / "step-1.pt").read_bytes() == b"weights"
        (pod.paths.root / "model" / "model.pt").write_bytes(f"model of {pod.host}".encode())
        (pod.paths.root / "checkpoints" / f"{pod.host}.pt").write_bytes(b"new")
        assert deliver(pod, tmp_path / index / "scratch") is None
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]}
    assert {"ckpt/algo-1.pt", "ckpt/algo-2.pt", "out/tiny/output/model.tar.gz"} <= keys
    body = s3.get_object(Bucket=bucket, Key="out/tiny/output/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        member = tar.extractfile("model.pt")
        assert member is not None and member.read() == b"model of algo-1"
