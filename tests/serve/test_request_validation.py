"""serve's one validation of every request (protocol.validate → request_rules: the service model's patterns, enums
and bounds, serve's S3-only rule) and the job-spec rules past it, for v2 and container-command requests alike: what
reached files and folders before is refused at CreateTrainingJob with the key path, the value and what is allowed,
before anything is created. Also: distributed.json read once and failing closed, DescribeTrainingJob reading one
snapshot of a job whose thread is moving on."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from botocore.exceptions import ClientError

from smdist_launcher.serve.protocol import ApiError, service_model, validate
from smdist_launcher.serve.request_rules import compiled

from .conftest import REGION, Served, use_client_environment
from .test_auth import run_as_serve  # noqa: F401 - the --run-as nobody serve, for the root cases
from .test_container_command_jobs import bucket, command_request  # noqa: F401 - the command jobs' bucket
from .test_serve import _request, _unique, code  # noqa: F401 - the v2 jobs' code bucket

pytestmark = pytest.mark.timeout(600)

# What serve answers (server.py's Endpoint): every pattern of their inputs must be one serve can check.
SERVED = {"sagemaker": ["CreateTrainingJob", "DescribeTrainingJob", "StopTrainingJob", "ListTrainingJobs", "ListTags"],
          "logs": ["DescribeLogStreams", "GetLogEvents"],
          "cloudwatch": ["ListMetrics", "GetMetricStatistics", "GetMetricData"]}


def _patterns(shape: Any, seen: set[str]) -> set[str]:
    if shape.name in seen:
        return set()
    seen.add(shape.name)
    found = {shape.metadata["pattern"]} if "pattern" in shape.metadata else set()
    if shape.type_name == "structure":
        for member in shape.members.values():
            found |= _patterns(member, seen)
    elif shape.type_name == "list":
        found |= _patterns(shape.member, seen)
    elif shape.type_name == "map":
        found |= _patterns(shape.key, seen) | _patterns(shape.value, seen)
    return found


def test_every_pattern_of_the_operations_serve_answers_can_be_checked() -> None:
    patterns = {p for service, operations in SERVED.items() for op in operations
                for p in _patterns(service_model(service).operation_model(op).input_shape, set())}
    assert len(patterns) > 20
    assert [p for p in patterns if compiled(p) is None] == []


def test_patterns_match_the_whole_value_as_java_does() -> None:
    job = compiled("[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
    assert job is not None and job.fullmatch("job-1") and not job.fullmatch("job-1\n") and not job.fullmatch("a/b")
    any_line = compiled(".*")  # Java's `.` stops at every line terminator, not only \n
    assert any_line is not None and any_line.fullmatch("a b") and not any(
        any_line.fullmatch(f"a{end}b") for end in ("\n", "\r", "\u0085", "\u2028", "\u2029"))
    tag = compiled("([\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]*)")  # Unicode letters, separators, numbers
    assert tag is not None and tag.fullmatch("héllo wörld 42") and not tag.fullmatch("a\x00") \
        and not tag.fullmatch("a;b")
    alnum = compiled("arn:[\\p{Alnum}\\-]+:x")  # Java's POSIX classes are ASCII
    assert alnum is not None and alnum.fullmatch("arn:aws-1:x") and not alnum.fullmatch("arn:äws:x")
    assert compiled("[\\w]+") is not None and not compiled("[\\w]+").fullmatch("é")  # type: ignore[union-attr]


def _message(service: str, operation: str, params: dict[str, Any]) -> str:
    with pytest.raises(ApiError) as info:
        validate(service, operation, params)
    assert info.value.code == "ValidationException" and info.value.status == 400
    return info.value.message


def test_one_answer_names_each_key_path_its_value_and_what_is_allowed() -> None:
    request = _request("some-bucket", "served-x")
    request.update(TrainingJobName="served-x\n", Environment={"OK": "1", "A\nB": "x"},
                   HyperParameters={f"k{i}": "v" for i in range(101)})
    request["ResourceConfig"]["InstanceType"] = "ml.nope"
    request["InputDataConfig"][0]["ChannelName"] = "../../../../root/.ssh"
    request["OutputDataConfig"]["S3OutputPath"] = "file:///etc/cron.d"
    request["CheckpointConfig"] = {"S3Uri": "https://example.com/x", "LocalPath": "/opt/ml/checkpoints"}
    request["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "loss", "Regex": "x" * 65536}]
    message = _message("sagemaker", "CreateTrainingJob", request)
    assert message.startswith("8 validation errors detected: ")
    for expected in (
            "Value 'served-x\\n' at 'TrainingJobName' failed to satisfy constraint: Member must satisfy regular "
            "expression pattern: [a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}",
            "at 'Environment['A\\nB'].<key>'", "at 'HyperParameters' failed to satisfy constraint: Member must have "
            "length less than or equal to 100",
            "Value 'ml.nope' at 'ResourceConfig.InstanceType' failed to satisfy constraint: Member must satisfy enum "
            "value set: [ml.m4.xlarge",
            "at 'InputDataConfig[0].ChannelName'", "Value 'file:///etc/cron.d' at 'OutputDataConfig.S3OutputPath'",
            "Value 'https://example.com/x' at 'CheckpointConfig.S3Uri' failed to satisfy constraint: must be an "
            "s3://<bucket>/<prefix> URI",
            "at 'AlgorithmSpecification.MetricDefinitions[0].Regex' failed to satisfy constraint: Member must have "
            "length less than or equal to 500"):
        assert expected in message, (expected, message)
    assert len(message) < 4000  # a 64 KiB value is shown cut short


def test_describe_stop_and_log_inputs_are_checked_too() -> None:
    assert "TrainingJobName" in _message("sagemaker", "DescribeTrainingJob", {"TrainingJobName": "../../x"})
    assert "TrainingJobName" in _message("sagemaker", "StopTrainingJob", {"TrainingJobName": "/some/dir"})
    assert "logStreamName" in _message("logs", "GetLogEvents", {"logGroupName": "/aws/sagemaker/TrainingJobs",
                                                                "logStreamName": "a:b*"})


# ---- through a running serve -------------------------------------------------------------------------------------
def _raw(client: Any) -> Any:
    """The same client with botocore's own parameter checks off: values reach serve as sent."""
    import boto3
    from botocore.config import Config

    return boto3.client(client.meta.service_model.service_name, region_name=REGION,
                        endpoint_url=client.meta.endpoint_url,
                        config=Config(parameter_validation=False, retries={"max_attempts": 1}))


def _refused(raw: Any, request: dict[str, Any]) -> str:
    with pytest.raises(ClientError) as info:
        raw.create_training_job(**request)
    assert info.value.response["Error"]["Code"] == "ValidationException", info.value.response
    return str(info.value.response["Error"]["Message"])


@pytest.fixture()
def victim() -> Iterator[Path]:
    """A folder whose path is short enough to pass a 63-character name limit (before, the error path rmtree'd it)."""
    folder = Path(tempfile.mkdtemp(prefix="smdv-"))
    (folder / "keep.txt").write_text("still here")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_container_command_name_never_names_a_folder(clients: dict[str, Any], bucket: str,  # noqa: F811
                                                       victim: Path) -> None:
    assert len(str(victim)) <= 63
    for name in (str(victim), "../../x", "job\n"):
        message = _refused(_raw(clients["sagemaker"]), command_request(bucket, name, "true", count=1))
        assert "at 'TrainingJobName'" in message
    assert (victim / "keep.txt").read_text() == "still here"


def test_channel_names_never_become_paths(clients: dict[str, Any], bucket: str) -> None:  # noqa: F811
    for channel in ("../../../../root/.ssh", "..", "."):  # "." and ".." pass SageMaker's pattern: the job-spec rule
        request = command_request(bucket, _unique("cmd-chan"), "true", count=1)
        request["InputDataConfig"][0]["ChannelName"] = channel
        message = _refused(_raw(clients["sagemaker"]), request)
        assert "InputDataConfig[0].ChannelName" in message and repr(channel) in message, message
    v2 = _request(bucket, _unique("v2-chan"))
    v2["InputDataConfig"][0]["ChannelName"] = ".."
    assert "not '.' or '..'" in _refused(_raw(clients["sagemaker"]), v2)


@pytest.fixture(scope="module")
def root_serve(request: pytest.FixtureRequest, serve_endpoint: Served) -> Served:
    """As root (CI): the serve started with --run-as nobody, where root copies what a URI names; else ours."""
    if os.geteuid() == 0 and shutil.which("setpriv"):
        served: Served = request.getfixturevalue("run_as_serve")
        return served
    return serve_endpoint


@pytest.fixture()
def root_sagemaker(root_serve: Served, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A raw SageMaker client of that serve (made now: it keeps the key it found, whatever fixture comes next)."""
    import boto3

    use_client_environment(monkeypatch, root_serve, moto_endpoint)
    return _raw(boto3.client("sagemaker", region_name=REGION))


def _with(request: dict[str, Any], where: str, value: str) -> dict[str, Any]:
    if where == "channel":
        request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] = value
    elif where == "output":
        request["OutputDataConfig"]["S3OutputPath"] = value
    else:
        request["CheckpointConfig"] = {"S3Uri": value, "LocalPath": "/opt/ml/checkpoints"}
    return request


@pytest.mark.parametrize("kind", ["v2", "command"])
def test_s3_uri_fields_take_s3_only(root_sagemaker: Any, bucket: str, tmp_path: Path,  # noqa: F811
                                    kind: str) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "id_rsa").write_text("private")
    keys = {"channel": "InputDataConfig[0].DataSource.S3DataSource.S3Uri", "output": "OutputDataConfig.S3OutputPath",
            "checkpoint": "CheckpointConfig.S3Uri"}
    for where, key in keys.items():
        for value in (f"file://{secret}", str(secret), f"https://{bucket}.s3.amazonaws.com/x"):
            base = (_request(bucket, _unique("v2-uri")) if kind == "v2"
                    else command_request(bucket, _unique("cmd-uri"), "true", count=1))
            message = _refused(root_sagemaker, _with(base, where, value))
            assert f"at '{key}' failed to satisfy constraint" in message, message
    assert sorted(p.name for p in secret.iterdir()) == ["id_rsa"]


@pytest.mark.parametrize("kind", ["v2", "command"])
def test_the_checkpoint_path_stays_under_opt_ml(root_sagemaker: Any, bucket: str,  # noqa: F811
                                                kind: str) -> None:
    request = (_request(bucket, _unique("v2-ckpt")) if kind == "v2"
               else command_request(bucket, _unique("cmd-ckpt"), "true", count=1))
    request["CheckpointConfig"] = {"S3Uri": f"s3://{bucket}/checkpoints", "LocalPath": "/opt/ml/../../etc/cron.d"}
    message = _refused(root_sagemaker, request)
    assert "CheckpointConfig.LocalPath" in message and "/opt/ml" in message and "'/etc/cron.d'" in message


def test_the_checkpoint_path_the_hosts_get_is_normalized() -> None:
    """What the hosts' folders are built from has no '..' left: a raw 'ckpt/../x' would follow whatever 'ckpt' is
    on disk when root restores or saves the checkpoints."""
    from smdist_launcher.serve.container_jobs import container_plan

    request = command_request("some-bucket", "cmd-norm", "true", count=1)
    request["CheckpointConfig"] = {"S3Uri": "s3://some-bucket/c", "LocalPath": "/opt/ml/ckpt/../x//y/"}
    assert container_plan(request).checkpoint_local_path == "/opt/ml/x/y"


def test_a_v2_job_takes_its_code_from_s3_only(clients: dict[str, Any], code: str) -> None:  # noqa: F811
    request = _request(code, _unique("v2-code"))
    del request["HyperParameters"]["sagemaker_submit_directory"]
    request["HyperParameters"]["sagemaker_program"] = '"/etc/hostname"'  # a file of serve's machine
    message = _refused(_raw(clients["sagemaker"]), request)
    assert "HyperParameters.sagemaker_submit_directory" in message and "HyperParameters.sagemaker_program" in message
    request = _request(code, _unique("v2-code"))
    request["HyperParameters"]["sagemaker_submit_directory"] = json.dumps("file:///root")
    assert "HyperParameters.sagemaker_submit_directory" in _refused(_raw(clients["sagemaker"]), request)
    request = _request(code, _unique("v2-code"))
    request["HyperParameters"]["sagemaker_program"] = '"../../train.py"'
    assert "HyperParameters.sagemaker_program" in _refused(_raw(clients["sagemaker"]), request)


def _with_drivers(bucket: str, name: str) -> dict[str, Any]:  # noqa: F811
    request = command_request(bucket, name, "true", count=1)
    request["InputDataConfig"].append({"ChannelName": "sm_drivers", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": f"s3://{bucket}/{name}/sm_drivers",
        "S3DataDistributionType": "FullyReplicated"}}})
    return request


def test_the_v3_mpi_check_fails_closed(clients: dict[str, Any], bucket: str) -> None:  # noqa: F811
    """On the process backend: a distributed.json that cannot be read or is not an object refuses the job (before,
    it counted as "no MPI" and v3's driver ran as root)."""
    s3 = clients["s3"]
    name = _unique("cmd-nodrv")
    s3.put_object(Bucket=bucket, Key=f"{name}/sm_drivers/sm_train.sh", Body=b"true\n")  # no distributed.json
    message = _refused(_raw(clients["sagemaker"]), _with_drivers(bucket, name))
    assert "InputDataConfig.sm_drivers.distributed.json" in message and "cannot be read" in message
    name = _unique("cmd-baddrv")
    s3.put_object(Bucket=bucket, Key=f"{name}/sm_drivers/distributed.json", Body=b"[not json")
    assert "is not a JSON object" in _refused(_raw(clients["sagemaker"]), _with_drivers(bucket, name))


def test_the_hosts_get_the_distributed_json_the_check_read(clients: dict[str, Any], bucket: str,  # noqa: F811
                                                           tmp_path: Path) -> None:
    """Read once at CreateTrainingJob: what S3 holds later (an MPI config put there after the check) is not what the
    hosts get; the channel's other files are fetched as they are."""
    from smdist_launcher.serve.container_jobs import CheckedCommand, container_plan, pinned_plan

    s3 = clients["s3"]
    name = _unique("cmd-pin")
    request = _with_drivers(bucket, name)
    s3.put_object(Bucket=bucket, Key=f"{name}/sm_drivers/sm_train.sh", Body=b"echo hi\n")
    s3.put_object(Bucket=bucket, Key=f"{name}/sm_drivers/distributed.json",
                  Body=json.dumps({"mpi_additional_options": []}).encode())
    plan = pinned_plan(CheckedCommand(container_plan(request), b"{}"), tmp_path / "drivers")
    assert plan.channels["sm_drivers"].uri == (tmp_path / "drivers").as_uri()
    assert (tmp_path / "drivers" / "distributed.json").read_bytes() == b"{}"
    assert (tmp_path / "drivers" / "sm_train.sh").read_bytes() == b"echo hi\n"
    assert plan.channels["code"] == container_plan(request).channels["code"]


# ---- DescribeTrainingJob while the job moves on ------------------------------------------------------------------
class _PhasesGrowingWhileRead(dict):  # type: ignore[type-arg]
    """A record's phases whose job thread enters a phase while they are walked: what a thread switch in the middle of
    DescribeTrainingJob did at random ("dictionary changed size during iteration", a 500)."""

    def items(self):  # type: ignore[no-untyped-def, override]
        for i, pair in enumerate(super().items()):
            yield pair
            if i == 0:
                self["uploading"] = [time.time(), None]


def test_describe_reads_one_snapshot_while_the_job_enters_phases(tmp_path: Path) -> None:
    from smdist_launcher.backends.toolkit.records import JobRecord
    from smdist_launcher.serve.jobs import Jobs, ServedJob, Settings

    record = JobRecord(job_name="snap", job_id="1", job_dir=str(tmp_path))
    for phase in ("staging", "starting", "running"):
        record.enter_phase(phase)
    record.phases = _PhasesGrowingWhileRead(record.phases)
    jobs = Jobs(Settings(jobs_dir=tmp_path))
    served = ServedJob({"TrainingJobName": "snap"})
    served.local = SimpleNamespace(record=record, job_dir=tmp_path, diagnosis="", model_data=None)
    jobs._jobs["snap"] = served
    described = jobs.describe("snap")
    assert described["TrainingJobStatus"] == "InProgress"
    assert [t["Status"] for t in described["SecondaryStatusTransitions"]] == ["Starting", "Downloading", "Training"]
