"""Requests an attacker sends that passed serve's validation before (issue 28, found by attacking it): a
container-command request naming more hosts than this machine holds (serve built the plan in the request's thread,
then started a process tree per host as root), a group name twice, a run longer than SageMaker allows; metric regexes
Python cannot compile (the job started, then failed); a timestamp out of range (a 500); a name whose folder is
already in the jobs folder (accepted, then Failed). Each is a ValidationException or ResourceInUse at create, with
the request's key path, before any folder or process."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from smdist_launcher.jobspec.local_capacity import capacity
from smdist_launcher.serve.jobs import Jobs, Settings
from smdist_launcher.serve.protocol import ApiError, validate

from .conftest import Served
from .test_container_command_jobs import bucket, command_request  # noqa: F401 - the command jobs' bucket
from .test_request_validation import _raw
from .test_serve import _request, _unique

pytestmark = pytest.mark.timeout(300)


class _NotRun(Jobs):
    """Jobs whose accepted requests start nothing (create's checks are what is tested)."""

    def _run(self, job: Any) -> None:
        return None


def _refusal(jobs: Jobs, request: dict[str, Any], code: str = "ValidationException") -> str:
    with pytest.raises(ApiError) as info:
        jobs.create(request)
    assert info.value.code == code, info.value.message
    return info.value.message


def test_a_container_command_names_no_more_hosts_than_this_machine_holds(tmp_path: Path) -> None:
    jobs = _NotRun(Settings(jobs_dir=tmp_path / "jobs"))
    request = command_request("smdist-attack", "cmd-many", "true", count=1)
    too_many = capacity().processes   # a command and a runtime each: twice what this machine holds
    request["ResourceConfig"]["InstanceCount"] = too_many   # before: accepted (10^6 took 7 s to plan, 10^30 forever)
    message = _refusal(jobs, request)
    assert "ResourceConfig.InstanceCount" in message and "this machine" in message, message
    grouped = command_request("smdist-attack", "cmd-many-groups", "true", count=1)
    del grouped["ResourceConfig"]["InstanceCount"], grouped["ResourceConfig"]["InstanceType"]
    grouped["ResourceConfig"]["InstanceGroups"] = [
        {"InstanceGroupName": "a", "InstanceType": "ml.m5.xlarge", "InstanceCount": too_many},
        {"InstanceGroupName": "a", "InstanceType": "ml.m5.xlarge", "InstanceCount": 1}]
    message = _refusal(jobs, grouped)
    assert "ResourceConfig.InstanceGroups" in message and "this machine" in message, message
    assert "ResourceConfig.InstanceGroups[1].InstanceGroupName" in message, message
    assert not (tmp_path / "jobs").exists()


def test_a_container_command_runs_no_longer_than_sagemaker_allows(tmp_path: Path) -> None:
    request = command_request("smdist-attack", "cmd-long", "true", count=1)
    request["StoppingCondition"]["MaxRuntimeInSeconds"] = 10 ** 30
    message = _refusal(_NotRun(Settings(jobs_dir=tmp_path)), request)
    assert "StoppingCondition.MaxRuntimeInSeconds" in message and "2419200" in message, message


@pytest.mark.parametrize("kind", ["v2", "command"])
def test_metric_regexes_are_compiled_at_create(tmp_path: Path, kind: str) -> None:
    request = (_request("smdist-attack", "re-v2") if kind == "v2"
               else command_request("smdist-attack", "re-cmd", "true", count=1))
    request["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "loss", "Regex": "loss=([0-9.]+)"},
                                                              {"Name": "bad", "Regex": "(["}]
    message = _refusal(_NotRun(Settings(jobs_dir=tmp_path)), request)
    assert "AlgorithmSpecification.MetricDefinitions[1].Regex" in message and "'(['" in message, message


def test_a_timestamp_out_of_range_is_a_validation_error() -> None:
    for value in (10 ** 30, -10 ** 30, float("nan")):
        with pytest.raises(ApiError) as info:
            validate("sagemaker", "ListTrainingJobs", {"CreationTimeAfter": value})
        assert info.value.code == "ValidationException" and "CreationTimeAfter" in info.value.message, value


def test_a_name_whose_folder_exists_is_in_use(clients: dict[str, Any], bucket: str,  # noqa: F811
                                             serve_endpoint: Served) -> None:
    """A job of an earlier serve (its folder, record and logs) keeps its name: ResourceInUse, as SageMaker answers."""
    name = _unique("cmd-earlier")
    earlier = serve_endpoint.jobs / name
    earlier.mkdir()
    (earlier / "job.json").write_text(json.dumps({"job_name": name}))
    with pytest.raises(ClientError) as info:
        _raw(clients["sagemaker"]).create_training_job(**command_request(bucket, name, "true", count=1))
    assert info.value.response["Error"]["Code"] == "ResourceInUse", info.value.response
    assert json.loads((earlier / "job.json").read_text()) == {"job_name": name}



@pytest.mark.parametrize("kind", ["v2", "command"])
def test_no_string_of_a_request_holds_nul_or_a_lone_surrogate(tmp_path: Path, kind: str) -> None:
    """JSON's "\\ud800" and NUL pass the model's `.*` patterns: accepted, the job failed later (UnicodeEncodeError
    while staging, a traceback from the runtime for a NUL hyperparameter name)."""
    request = (_request("smdist-attack", "text-v2") if kind == "v2"
               else command_request("smdist-attack", "text-cmd", "true", count=1))
    request["Environment"] = {"X": "a\ud800"}
    request["HyperParameters"].update({"\udfff": "1", "nul\x00": "1", "v": "x\x00"})
    message = _refusal(_NotRun(Settings(jobs_dir=tmp_path)), request)
    for key in ("'Environment.X'", "'HyperParameters['\\udfff'].<key>'", "'HyperParameters['nul\\x00'].<key>'",
                "'HyperParameters.v'"):
        assert f"at {key} failed to satisfy constraint: Member must be text without NUL" in message, (key, message)


@pytest.mark.parametrize("local_path", ["/opt/ml", "/opt/ml/", "/opt/ml/input/config", "/opt/ml/code/../input",
                                        "/opt/ml/model/ckpt", "/opt/ml/output"])
def test_the_checkpoint_folder_is_none_the_launcher_fills(tmp_path: Path, local_path: str) -> None:
    """A checkpoint folder of /opt/ml/input/config had its S3 checkpoints restored over the hosts' config (a v2 job
    failed: "host 'algo-2' is not in the plan"); /opt/ml itself, over everything."""
    for request in (_request("smdist-attack", "ckpt-v2"), command_request("smdist-attack", "ckpt-cmd", "true")):
        request["CheckpointConfig"] = {"S3Uri": "s3://smdist-attack/ckpt", "LocalPath": local_path}
        message = _refusal(_NotRun(Settings(jobs_dir=tmp_path)), request)
        assert "CheckpointConfig.LocalPath" in message and "/opt/ml/checkpoints" in message, message
    request = command_request("smdist-attack", "ckpt-ok", "true")
    request["CheckpointConfig"] = {"S3Uri": "s3://smdist-attack/ckpt", "LocalPath": "/opt/ml/checkpoints/run-1"}
    _NotRun(Settings(jobs_dir=tmp_path)).create(request)


def test_a_command_request_cannot_turn_host_isolation_off(tmp_path: Path) -> None:
    """The private /opt/ml a container command needs on the process backend is the hosts' runtime's to make, and the
    request's Environment reaches that runtime: SMDIST_HOST_ISOLATION=off there had every host share this machine's
    /opt/ml (the check looked at serve's own environment only)."""
    from smdist_launcher.container.host_isolation import ISOLATION_ENV

    request = command_request("smdist-attack", "cmd-shared", "true", count=1)
    request["Environment"] = {ISOLATION_ENV: "off"}
    message = _refusal(_NotRun(Settings(jobs_dir=tmp_path)), request)
    assert f"Environment.{ISOLATION_ENV}=off" in message and "AlgorithmSpecification.ContainerEntrypoint" in message


@pytest.mark.parametrize("key", ["sagemaker_submit_directory", "sagemaker_program", "epochs"])
def test_a_hyperparameter_nested_past_the_json_parser_is_refused(tmp_path: Path, key: str) -> None:
    """2,500 characters (the model's limit) of '[[[...]]]': decoding a v2 request's hyperparameters raised
    RecursionError, a 500 with no key path."""
    request = _request("smdist-attack", "deep-hp")
    request["HyperParameters"][key] = "[" * 1250 + "]" * 1250
    message = _refusal(_NotRun(Settings(jobs_dir=tmp_path)), request)
    assert f"HyperParameters.{key}" in message and "nested deeper" in message, message


def test_a_v2_requests_channels_are_checked_like_a_commands(tmp_path: Path) -> None:
    """A v2 request's channels become a mapping of fit() inputs: a channel named twice silently replaced the first
    (the job ran on the second's data), a FileSystemDataSource channel was silently left out, and '..' was reported
    at 'InputDataConfig...' (no index, no ChannelName)."""
    jobs = _NotRun(Settings(jobs_dir=tmp_path))
    twice = _request("smdist-attack", "chan-twice")
    twice["InputDataConfig"].append({"ChannelName": "train", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": "s3://smdist-attack/other"}}})
    message = _refusal(jobs, twice)
    assert "InputDataConfig[1].ChannelName" in message and "given before" in message, message
    efs = _request("smdist-attack", "chan-efs")
    efs["InputDataConfig"].append({"ChannelName": "fs", "DataSource": {"FileSystemDataSource": {
        "FileSystemId": "fs-1234567890", "FileSystemAccessMode": "ro", "FileSystemType": "EFS",
        "DirectoryPath": "/etc"}}})
    message = _refusal(jobs, efs)
    assert "InputDataConfig[1].DataSource" in message and "S3DataSource" in message, message
    dots = _request("smdist-attack", "chan-dots")
    dots["InputDataConfig"][0]["ChannelName"] = ".."
    message = _refusal(jobs, dots)
    assert "InputDataConfig[0].ChannelName" in message and "'..'" in message, message
    assert not tmp_path.joinpath("chan-twice").exists()


def test_list_training_jobs_pages_every_job_and_refuses_a_token_it_never_gave(tmp_path: Path) -> None:
    """ListTrainingJobs answered the first MaxResults jobs and no NextToken (a paginator never saw the rest) and took
    any NextToken silently."""
    jobs = _NotRun(Settings(jobs_dir=tmp_path))
    for i in range(5):
        jobs.create(_request("smdist-attack", f"page-{i}"))
    seen, token = [], None
    while True:
        page = jobs.summaries({"MaxResults": 2, "SortOrder": "Ascending", **({"NextToken": token} if token else {})})
        seen += [row["TrainingJobName"] for row in page["TrainingJobSummaries"]]
        token = page.get("NextToken")
        if token is None:
            break
    assert seen == [f"page-{i}" for i in range(5)]
    for hostile in ("-2", "../x", " 1", "9" * 5000):
        with pytest.raises(ApiError) as info:
            jobs.summaries({"NextToken": hostile})
        assert info.value.code == "ValidationException" and "NextToken" in info.value.message, hostile
