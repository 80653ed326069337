"""`smdist serve` through boto3 only: a real serve process, moto's server as S3, jobs run by the local backend."""
from __future__ import annotations

import io
import json
import os
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from smdist_launcher.backends.sagemaker.logs import LOG_GROUP

from .conftest import REGION, running_serve, use_client_environment

TRAIN = r'''
import json, os, socket, sys, time
host = json.loads(os.environ["SM_HOSTS"]).index(os.environ["SM_CURRENT_HOST"])
mode = os.environ.get("MODE", "ok")
print(f"hello from {os.environ['SM_CURRENT_HOST']}", flush=True)
print(f"hostname {socket.gethostname()}", flush=True)
if mode == "fail" and host == 1:
    print("about to fail", flush=True)
    sys.exit("the data is bad")
if mode == "sleep":
    print("sleeping", flush=True)  # before the pid file: a test that saw the file can count on the line
    with open(os.path.join(os.environ["PIDS_DIR"], f"{os.getpid()}"), "w") as f:
        f.write("x")
    time.sleep(600)
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"model-{host}.txt"), "w") as f:
    f.write("weights")
print("done", flush=True)
'''
# A host of a heterogeneous job: which group it is in, what it knows of the cluster, its rank (torchrun's, if any).
HETERO = r'''
import json, os
env = json.loads(os.environ["SM_TRAINING_ENV"])
seen = {"group": os.environ["SM_CURRENT_INSTANCE_GROUP"], "hetero": os.environ["SM_IS_HETERO"],
        "master": env["master_hostname"], "rank": os.environ.get("RANK")}
print("seen " + json.dumps(seen, sort_keys=True), flush=True)
with open(os.path.join(os.environ["SM_MODEL_DIR"], os.environ["SM_CURRENT_HOST"] + ".json"), "w") as f:
    json.dump(seen, f)
'''


def signed_request(url: str, target: str, body: bytes, *, credentials: Any = None,
                   headers: dict[str, str] | None = None) -> Any:
    """A urllib request signed with SigV4 by `credentials` (default: the environment's profile, as boto3 reads it)."""
    import urllib.request

    import boto3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    request = AWSRequest(method="POST", url=url, data=body, headers={
        "X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.1", **(headers or {})})
    service = "logs" if target.startswith("Logs_") else "sagemaker"
    SigV4Auth(credentials or boto3.Session().get_credentials(), service, REGION).add_auth(request)
    return urllib.request.Request(url, data=body, method="POST", headers=dict(request.headers.items()))


def _unique(name: str) -> str:
    return f"{name}-{time.monotonic_ns() % 10**10}"


@pytest.fixture()
def code(clients: dict[str, Any]) -> str:
    s3 = clients["s3"]
    bucket = _unique("serve")
    s3.create_bucket(Bucket=bucket)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in (("train.py", TRAIN), ("hetero.py", HETERO)):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    s3.put_object(Bucket=bucket, Key="code/sourcedir.tar.gz", Body=buf.getvalue())
    s3.put_object(Bucket=bucket, Key="data/train/part-0.txt", Body=b"1 2 3\n")
    return bucket


def _request(bucket: str, name: str, **env: str) -> dict[str, Any]:
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/"
                                                    "pytorch-training:2.3-cpu-py311",
                                   "TrainingInputMode": "File"},
        "RoleArn": "arn:aws:iam::123456789012:role/R",
        "HyperParameters": {"sagemaker_program": '"train.py"',
                            "sagemaker_submit_directory": json.dumps(f"s3://{bucket}/code/sourcedir.tar.gz")},
        "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": f"s3://{bucket}/data/train",
            "S3DataDistributionType": "FullyReplicated"}}}],
        "OutputDataConfig": {"S3OutputPath": f"s3://{bucket}/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
        "Environment": env,
    }


def _wait(sagemaker: Any, name: str, until: tuple[str, ...] = ("Completed", "Failed", "Stopped")) -> dict[str, Any]:
    deadline = time.monotonic() + 300
    while True:
        described = sagemaker.describe_training_job(TrainingJobName=name)
        if described["TrainingJobStatus"] in until:
            return described
        assert time.monotonic() < deadline, described
        time.sleep(0.2)


def _logs(logs: Any, name: str) -> dict[str, list[str]]:
    streams = logs.describe_log_streams(logGroupName=LOG_GROUP, logStreamNamePrefix=f"{name}/")["logStreams"]
    out = {}
    for s in streams:
        events = logs.get_log_events(logGroupName=LOG_GROUP, logStreamName=s["logStreamName"], startFromHead=True)
        out[s["logStreamName"].split("/", 1)[1].rsplit("-", 1)[0]] = [e["message"] for e in events["events"]]
    return out


def test_completed_job_with_transitions_logs_and_model(clients: dict[str, Any], code: str) -> None:
    sagemaker, logs, s3 = clients["sagemaker"], clients["logs"], clients["s3"]
    name = _unique("served-ok")
    arn = sagemaker.create_training_job(**_request(code, name))["TrainingJobArn"]
    assert arn.endswith(f":training-job/{name}")
    first = sagemaker.describe_training_job(TrainingJobName=name)
    assert first["TrainingJobStatus"] == "InProgress"
    done = _wait(sagemaker, name)
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    steps = [t["Status"] for t in done["SecondaryStatusTransitions"]]
    assert steps[0] == "Starting" and steps[-1] == "Completed" and "Training" in steps
    model = done["ModelArtifacts"]["S3ModelArtifacts"]
    assert model == f"s3://{code}/output/{name}/output/model.tar.gz"
    body = s3.get_object(Bucket=code, Key=f"output/{name}/output/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        assert {"model-0.txt", "model-1.txt"} <= {Path(n).name for n in tar.getnames()}
    per_host = _logs(logs, name)
    assert sorted(per_host) == ["algo-1", "algo-2"]
    assert any("hello from algo-2" in line for line in per_host["algo-2"])
    listed = sagemaker.list_training_jobs(NameContains=name)["TrainingJobSummaries"]
    assert [(j["TrainingJobName"], j["TrainingJobStatus"]) for j in listed] == [(name, "Completed")]
    with pytest.raises(ClientError) as info:  # the same name twice
        sagemaker.create_training_job(**_request(code, name))
    assert info.value.response["Error"]["Code"] == "ResourceInUse"


def test_heterogeneous_job_keeps_its_groups_and_runs_the_distribution_on_one(clients: dict[str, Any],
                                                                            code: str) -> None:
    sagemaker, logs, s3 = clients["sagemaker"], clients["logs"], clients["s3"]
    name = _unique("served-hetero")
    request = _request(code, name)
    request["ResourceConfig"] = {"InstanceGroups": [
        {"InstanceGroupName": "data", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1},
        {"InstanceGroupName": "train", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2}], "VolumeSizeInGB": 30}
    request["HyperParameters"].update(sagemaker_program='"hetero.py"', sagemaker_torch_distributed_enabled="true",
                                      sagemaker_instance_type='"ml.p4d.24xlarge"',
                                      sagemaker_distribution_instance_groups='["train"]')
    sagemaker.create_training_job(**request)
    done = _wait(sagemaker, name)
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    assert done["ResourceConfig"]["InstanceGroups"] == request["ResourceConfig"]["InstanceGroups"]
    per_host = _logs(logs, name)
    assert sorted(per_host) == ["algo-1", "algo-2", "algo-3"]
    seen = {h: json.loads(next(line[5:] for line in lines if line.startswith("seen ")))
            for h, lines in per_host.items()}
    # the data host runs the script alone; the train hosts are torchrun's two nodes, algo-2 the master (rank 0)
    assert seen == {"algo-1": {"group": "data", "hetero": "true", "master": "algo-2", "rank": None},
                    "algo-2": {"group": "train", "hetero": "true", "master": "algo-2", "rank": "0"},
                    "algo-3": {"group": "train", "hetero": "true", "master": "algo-2", "rank": "1"}}
    body = s3.get_object(Bucket=code, Key=f"output/{name}/output/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        assert {"algo-1.json", "algo-2.json", "algo-3.json"} <= {Path(n).name for n in tar.getnames()}


def test_failed_job_gives_its_reason(clients: dict[str, Any], code: str) -> None:
    sagemaker = clients["sagemaker"]
    name = _unique("served-fail")
    sagemaker.create_training_job(**_request(code, name, MODE="fail"))
    done = _wait(sagemaker, name)
    assert done["TrainingJobStatus"] == "Failed" and done["SecondaryStatus"] == "Failed"
    assert "algo-2" in done["FailureReason"] and "the data is bad" in done["FailureReason"]


def test_stop_mid_job_ends_every_process(clients: dict[str, Any], code: str, tmp_path: Path) -> None:
    sagemaker, logs = clients["sagemaker"], clients["logs"]
    name = _unique("served-stop")
    sagemaker.create_training_job(**_request(code, name, MODE="sleep", PIDS_DIR=str(tmp_path)))
    deadline = time.monotonic() + 120
    while len(list(tmp_path.iterdir())) < 2:  # both hosts' scripts are running
        assert time.monotonic() < deadline and sagemaker.describe_training_job(
            TrainingJobName=name)["TrainingJobStatus"] == "InProgress"
        time.sleep(0.2)
    pids = [int(p.name) for p in tmp_path.iterdir()]
    sagemaker.stop_training_job(TrainingJobName=name)
    assert sagemaker.describe_training_job(TrainingJobName=name)["TrainingJobStatus"] in ("Stopping", "Stopped")
    done = _wait(sagemaker, name)
    assert done["TrainingJobStatus"] == "Stopped" and done["SecondaryStatus"] == "Stopped"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert any("sleeping" in line for line in _logs(logs, name)["algo-1"])
    with pytest.raises(ClientError):
        sagemaker.stop_training_job(TrainingJobName=name)  # no longer in progress


def test_requests_are_checked_against_the_service_model(clients: dict[str, Any], code: str) -> None:
    sagemaker = clients["sagemaker"]
    with pytest.raises(ClientError) as info:
        sagemaker.describe_training_job(TrainingJobName="no-such-job")
    assert info.value.response["Error"] == {"Code": "ValidationException", "Message": "Requested resource not found."}
    import urllib.request

    url = sagemaker.meta.endpoint_url
    bad = json.dumps({"TrainingJobName": "x", "AlgorithmSpecification": {"TrainingInputMode": "File"},
                      "RoleArn": "r", "OutputDataConfig": {}, "ResourceConfig": {"VolumeSizeInGB": "thirty"},
                      "StoppingCondition": {}}).encode()
    req = signed_request(url, "SageMaker.CreateTrainingJob", bad)  # a raw request: signed as boto3 would
    with pytest.raises(urllib.error.HTTPError) as raw:
        urllib.request.urlopen(req, timeout=60)
    answer = json.loads(raw.value.read())
    assert raw.value.code == 400 and answer["__type"] == "ValidationException"
    assert "ResourceConfig.VolumeSizeInGB" in answer["message"] and "S3OutputPath" in answer["message"]


def test_netns_backend_runs_each_host_in_its_own_namespace(code: str, moto_endpoint: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    from smdist_launcher.backends.registry import PROBES

    why_not = PROBES["netns"]()
    if why_not:
        pytest.skip(why_not)
    name = _unique("served-netns")
    with running_serve(moto_endpoint, tmp_path, "netns") as url:
        use_client_environment(monkeypatch, url, moto_endpoint)  # this serve's own profile
        sagemaker = boto3.client("sagemaker", endpoint_url=url, region_name=REGION)
        sagemaker.create_training_job(**_request(code, name))
        done = _wait(sagemaker, name)
        per_host = _logs(boto3.client("logs", endpoint_url=url, region_name=REGION), name)
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    assert "jobs run with the netns backend" in (tmp_path / "serve.log").read_text()
    # each host has its own UTS namespace: its hostname is its SageMaker host name
    assert [line for h in ("algo-1", "algo-2") for line in per_host[h] if line.startswith("hostname")] == [
        "hostname algo-1", "hostname algo-2"]


def test_a_backend_that_cannot_run_stops_serve_at_start(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", "SMDIST_JOBS_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "smdist_launcher.cli.main", "serve", "--port", "0", "--backend",
                           "docker"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("smdist serve: backend docker cannot run here: ")
    assert "use --backend process (or auto) instead" in done.stderr
