"""The official SageMaker SDK v3 (`ModelTrainer`), unchanged, as a client of `smdist serve`: each case is an SDK
process of its own (the v3 venv's python running v3_client.py), pointed at serve and moto by the environment only.

One serve (the suite's, process backend) and one v3 venv serve every case; the MPI case gets a netns serve. Jobs are
seconds long: tiny scripts, torch only where torchrun is the point."""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import REGION, Served, running_serve

CLIENT = Path(__file__).with_name("v3_client.py")
BUCKET = "smdist-v3-tests"
# v3's telemetry asks AWS's public endpoint: opted out through the SDK's own config file
TELEMETRY_OPT_OUT = "SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n"

TORCH_SCRIPT = r'''
import json, os, sys
import torch.distributed as dist
dist.init_process_group("gloo")
# gloo's connect handshake: a rank that leaves right after its init can close a pair its peer is still confirming
dist.barrier()
rank, world = dist.get_rank(), dist.get_world_size()
print(f"rank {rank} of world size {world} on {os.environ['SM_CURRENT_HOST']} args {sys.argv[1:]}", flush=True)
if rank == 0:
    with open("/opt/ml/model/model.txt", "w") as f:
        f.write(f"world size {world}")
dist.destroy_process_group()
'''
PLAIN_SCRIPT = r'''
import os, sys
print(f"plain run on {os.environ['SM_CURRENT_HOST']} args {sys.argv[1:]}", flush=True)
with open(f"/opt/ml/model/{os.environ['SM_CURRENT_HOST']}.txt", "w") as f:
    f.write("weights")
'''
FAILING_SCRIPT = r'''
raise SystemExit("the data is bad: 3 corrupt shards")
'''
SLEEPING_SCRIPT = r'''
import time
print("training forever", flush=True)
time.sleep(600)
'''
MPI_SCRIPT = r'''
import os
from mpi4py import MPI
comm = MPI.COMM_WORLD
print(f"mpi rank {comm.Get_rank()} of {comm.Get_size()} on {MPI.Get_processor_name()}", flush=True)
'''


@pytest.fixture(scope="session")
def v3_python(sdk_v3_python: Path) -> str:
    """The SDK v3 venv's python (tests/conftest.py's `sdk_v3_python`)."""
    return str(sdk_v3_python)


def _client_env(served: Served, moto_endpoint: str, folder: Path) -> dict[str, str]:
    config = folder / "sagemaker-config.yaml"
    config.write_text(TELEMETRY_OPT_OUT)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "SAGEMAKER_", "PYTHON")) and k != "VIRTUAL_ENV"}
    return {**env, **served.client_env, "AWS_SHARED_CREDENTIALS_FILE": str(served.jobs / "credentials"),
            "AWS_ENDPOINT_URL_S3": moto_endpoint, "AWS_ENDPOINT_URL_IAM": moto_endpoint,
            "AWS_ENDPOINT_URL_STS": moto_endpoint, "AWS_DEFAULT_REGION": REGION,
            "SAGEMAKER_USER_CONFIG_OVERRIDE": str(config), "SAGEMAKER_VALIDATE_ROLE": "false"}


@pytest.fixture(scope="module")
def bucket(moto_endpoint: str) -> str:
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name=REGION, aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    try:
        s3.create_bucket(Bucket=BUCKET)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    return BUCKET


def _source(folder: Path, script: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.py").write_text(script)
    return folder


class ClientRun:
    """One SDK v3 client process, started at once; result() waits for it."""

    def __init__(self, python: str, env: dict[str, str], spec: dict[str, Any], folder: Path) -> None:
        self.out = open(folder / "client.out", "w+")  # noqa: SIM115 - read and closed by result()
        self.proc = subprocess.Popen([python, str(CLIENT), json.dumps(spec)], env=env, stdout=self.out,
                                     stderr=subprocess.STDOUT, text=True)

    def result(self) -> tuple[dict[str, Any], str]:
        """(the client's RESULT, everything it printed)."""
        try:
            code = self.proc.wait(timeout=540)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.out.seek(0)
        output = self.out.read()
        self.out.close()
        lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
        assert code == 0 and lines, output[-6000:]
        return json.loads(lines[-1][len("RESULT "):]), output


def _model_files(moto_endpoint: str, uri: str) -> dict[str, str]:
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name=REGION, aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    bucket, key = uri.removeprefix("s3://").split("/", 1)
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        return {Path(m.name).name: tar.extractfile(m).read().decode()  # type: ignore[union-attr]
                for m in tar.getmembers() if m.isfile()}


# Every case's job, by name: the SDK spec and the script. They run at the same time (each job spends most of its
# time in the SDK's 5-second polls and v3's driver sleeps), distinct base job names keeping their names apart.
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "torchrun": (TORCH_SCRIPT, {"distributed": "torchrun", "instance_count": 2, "process_count_per_node": 1,
                                "hyperparameters": {"epochs": 2, "optimizer": "sgd"}}),
    "smp": (TORCH_SCRIPT, {"distributed": "smp", "instance_count": 2, "process_count_per_node": 1}),
    "none": (PLAIN_SCRIPT, {"instance_count": 2, "hyperparameters": {"lr": "0.1"}}),
    "failing": (FAILING_SCRIPT, {}),
    "stop": (SLEEPING_SCRIPT, {"action": "stop"}),
}


# MPI runs on netns hosts (v3's driver needs port 22 and /etc/environment of its own): 2 slots per host and, as v3
# passes -np <processes per host> as the total (docs/sagemaker.md), --map-by node to put one rank on each host, so
# the master's mpirun reaches algo-2 over ssh.
MPI_CASE = (MPI_SCRIPT, {"distributed": "mpi", "instance_count": 2, "process_count_per_node": 2,
                         "mpi_additional_options": ["--map-by", "node"]})


def _netns_unavailable() -> str | None:
    from smdist_launcher.backends.netns.job import NetnsUnavailable, check_available

    try:
        check_available()
    except NetnsUnavailable as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def runs(v3_python: str, serve_endpoint: Served, moto_endpoint: str, bucket: str,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ClientRun]]:
    """Every case's client, started at once (the MPI one against a netns serve, when this machine has netns)."""
    started: dict[str, ClientRun] = {}

    def start(name: str, served: Served, script: str, spec: dict[str, Any]) -> None:
        folder = tmp_path_factory.mktemp(f"v3-{name}")
        source = _source(folder / "src", script)
        started[name] = ClientRun(v3_python, _client_env(served, moto_endpoint, folder),
                                  {"bucket": bucket, "source_dir": str(source), "entry_script": "train.py",
                                   "base_job_name": f"v3-{name}", **spec}, folder)

    with contextlib.ExitStack() as stack:
        if _netns_unavailable() is None:
            netns = stack.enter_context(running_serve(moto_endpoint, tmp_path_factory.mktemp("serve-netns-v3"),
                                                      "netns"))
            start("mpi", netns, *MPI_CASE)
        for name, (script, spec) in CASES.items():
            start(name, serve_endpoint, script, spec)
        yield started
        for run in started.values():
            if run.proc.poll() is None:
                run.proc.kill()
                run.proc.wait(timeout=30)


@pytest.mark.timeout(600)
def test_torchrun_on_two_hosts_streams_every_host_and_lands_the_model(runs: dict[str, ClientRun],
                                                                    moto_endpoint: str) -> None:
    out, printed = runs["torchrun"].result()
    assert out["status"] == "Completed", (out, printed[-4000:])
    # every host's log lines reached the SDK (it prints them as "<stream>: <line>" or the bare line)
    assert "rank 0 of world size 2 on algo-1" in printed and "rank 1 of world size 2 on algo-2" in printed
    assert "'--epochs', '2', '--optimizer', 'sgd'" in printed   # v3's raw hyperparameters, passed by its driver
    assert _model_files(moto_endpoint, out["model"])["model.txt"] == "world size 2"


@pytest.mark.timeout(600)
def test_torchrun_with_smp_gets_its_mp_parameters(runs: dict[str, ClientRun]) -> None:
    out, printed = runs["smp"].result()
    assert out["status"] == "Completed", (out, printed[-4000:])
    assert "rank 1 of world size 2 on algo-2" in printed
    assert "'--mp_parameters'" in printed and "hybrid_shard_degree" in printed


@pytest.mark.timeout(600)
def test_no_distribution_runs_the_script_on_each_host(runs: dict[str, ClientRun], moto_endpoint: str) -> None:
    out, printed = runs["none"].result()
    assert out["status"] == "Completed", (out, printed[-4000:])
    assert "plain run on algo-1 args ['--lr', '0.1']" in printed and "plain run on algo-2" in printed
    assert "algo-1.txt" in _model_files(moto_endpoint, out["model"])


@pytest.mark.timeout(600)
def test_a_failing_script_gives_the_sdk_its_failure_reason(runs: dict[str, ClientRun]) -> None:
    out, printed = runs["failing"].result()
    assert out["status"] == "Failed"
    # what v3's driver wrote to /opt/ml/output/failure (SageMaker's FailureReason): its traceback of the script's exit
    reason = out["failure_reason"]
    assert reason.startswith("AlgorithmError: ") and "'train.py']' returned non-zero exit status 1" in reason, out
    assert "returned non-zero exit status 1" in (out["error"] or "")   # the SDK's FailedStatusError carries it
    assert "the data is bad: 3 corrupt shards" in printed               # and the script's own words were streamed


@pytest.mark.timeout(600)
def test_stop_ends_the_job(runs: dict[str, ClientRun]) -> None:
    out, printed = runs["stop"].result()
    assert out["status"] == "Stopped", (out, printed[-4000:])


@pytest.mark.timeout(600)
def test_mpi_on_netns_hosts(runs: dict[str, ClientRun]) -> None:
    if "mpi" not in runs:
        pytest.skip(_netns_unavailable() or "no netns")
    out, printed = runs["mpi"].result()
    assert out["status"] == "Completed", (out, printed[-4000:])
    assert "mpi rank 0 of 2 on algo-1" in printed and "mpi rank 1 of 2 on algo-2" in printed
