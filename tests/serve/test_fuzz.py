"""Hostile requests against a running `smdist serve`, generated from the SageMaker and Logs service models' own input
shapes (hypothesis): every string field gets, some of the time, a value meant to become a path or a command
(`..`, `/`, NUL, newlines, 64 KiB, URIs of every scheme, paths into a sentinel tree beside the jobs folder), and
CreateTrainingJob, DescribeTrainingJob, GetLogEvents and StopTrainingJob go through a signed botocore client with its
own parameter validation off, so the values reach serve as generated.

Invariants: no 5xx and no traceback in any answer; nothing outside the jobs folder is created, changed or removed
(the sentinel tree is compared byte for byte at the end, after every accepted job ended); serve still answers.
Accepted jobs cannot do real work: their code and data name a bucket that does not exist, so they fail while
staging, and each one is stopped right away."""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings, strategies as st

from smdist_launcher.backends.sagemaker.logs import LOG_GROUP

from .conftest import REGION, Served, running_serve, use_client_environment

pytestmark = pytest.mark.timeout(600)

EXAMPLES = 120                 # ~4 requests each; bounded so the test stays well under a minute on 2 cores
MISSING_BUCKET = "smdist-fuzz-missing"
NESTING = 6                     # serve's folders lie this deep below the test's tree (see hostile_strings)
BODY_LIMIT = 900_000            # below serve's body limit: this test is about values, not sizes
_KEEP = [True] * 15 + [False]   # how often a baseline value stays (shrinks towards keeping it)
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3-cpu-py311"


def _baselines(name: str) -> list[dict[str, Any]]:
    """A valid v2 request and a valid container-command request (both fail while staging: no such bucket)."""
    common = {
        "TrainingJobName": name, "RoleArn": "arn:aws:iam::123456789012:role/R",
        "InputDataConfig": [{"ChannelName": "train", "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": f"s3://{MISSING_BUCKET}/data",
            "S3DataDistributionType": "FullyReplicated"}}}],
        "OutputDataConfig": {"S3OutputPath": f"s3://{MISSING_BUCKET}/output"},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 60},
        "CheckpointConfig": {"S3Uri": f"s3://{MISSING_BUCKET}/checkpoints", "LocalPath": "/opt/ml/checkpoints"},
        "Environment": {"MODE": "fuzz"},
    }
    v2 = {**common, "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File"},
          "HyperParameters": {"sagemaker_program": '"train.py"',
                              "sagemaker_submit_directory": f'"s3://{MISSING_BUCKET}/code/sourcedir.tar.gz"'}}
    command = {**common, "AlgorithmSpecification": {"TrainingImage": IMAGE, "TrainingInputMode": "File",
                                                    "ContainerEntrypoint": ["/bin/false"],
                                                    "ContainerArguments": ["x"]},
               "HyperParameters": {"epochs": "1"}}
    return [v2, command]


def hostile_strings(arena: Path) -> list[str]:
    """Values meant to become paths, URIs or commands. Every path among them stays inside the test's own tree should
    a regression let it through: no bare "/", no path of this machine, no more ".." than the tree is deep below its
    root (serve's jobs folder and temporary folder are NESTING levels down); several aim at the sentinel."""
    sentinel = arena / "sentinel"
    return [
        "", ".", "..", "../..", "../../..", "a/b", "../../../../sentinel", "\x00", "a\x00b", "\n", "job\n", "\r\n",
        "a\u2028b", "\u202e", "%2e%2e%2f", str(sentinel), f"{sentinel}/a.txt", f"{sentinel}/new", f"{sentinel}/sub",
        "/opt/ml/../..", "/opt/ml/../../../sentinel", f"/opt/ml/../../..{sentinel}", f"file://{sentinel}",
        f"file://{sentinel}/a.txt", f"file://{sentinel}/new", f"file://localhost{sentinel}",
        f"s3://{MISSING_BUCKET}/../../x", f"s3://{MISSING_BUCKET}/x", "s3://UPPER/x", "s3://", "s3:///x",
        "https://127.0.0.1:1/x", "http://127.0.0.1:1/x", "ftp://127.0.0.1/x", "gopher://x", "data:,x",
        f"$(touch {sentinel}/pwned)", f"`touch {sentinel}/pwned`", f"; touch {sentinel}/pwned", "x" * 65536,
        "é" * 300, "algo-1", "train", "File",
    ]


def _string(shape: Any, hostile: list[str]) -> st.SearchStrategy[str]:
    options = [st.sampled_from(hostile), st.text(max_size=24)]
    if getattr(shape, "enum", None):
        options.append(st.sampled_from(list(shape.enum)))
    return st.one_of(*options)


def from_shape(shape: Any, hostile: list[str], base: Any = None, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values of a service-model shape: the baseline kept most of the time where there is one, else generated, with
    hostile strings in every string field."""
    kind = shape.type_name
    if kind == "structure":
        required, optional = {}, {}
        for name, member in shape.members.items():
            inner = base.get(name) if isinstance(base, dict) else None
            if inner is not None:
                required[name] = from_shape(member, hostile, inner, depth + 1)
            elif depth < 4:
                optional[name] = member
        # every member the shape has may come, one at a time and now and then beside the baseline's (with more, nearly
        # every request would stop at the first random pattern it breaks)
        extra = st.sampled_from(_KEEP).flatmap(
            lambda keep: st.just([]) if keep or not optional else st.lists(st.sampled_from(sorted(optional)),
                                                                         min_size=1, max_size=1))
        return st.tuples(st.fixed_dictionaries(required), extra.flatmap(
            lambda names: st.fixed_dictionaries({n: from_shape(optional[n], hostile, None, depth + 1)
                                                 for n in names}))).map(lambda pair: {**pair[0], **pair[1]})
    if kind == "list":
        if isinstance(base, list):
            return st.tuples(*(from_shape(shape.member, hostile, b, depth + 1) for b in base)).map(list)
        return st.lists(from_shape(shape.member, hostile, None, depth + 1), max_size=2)
    if kind == "map":
        if isinstance(base, dict):
            kept = st.fixed_dictionaries({k: from_shape(shape.value, hostile, v, depth + 1) for k, v in base.items()})
            extra = st.dictionaries(_string(shape.key, hostile), _string(shape.value, hostile), max_size=2)
            return st.tuples(kept, extra).map(lambda pair: {**pair[0], **pair[1]})
        return st.dictionaries(_string(shape.key, hostile), from_shape(shape.value, hostile, None, depth + 1),
                               max_size=2)
    if kind == "string":
        generated = _string(shape, hostile)
    elif kind in ("integer", "long"):
        generated = st.one_of(st.integers(-3, 3), st.integers(-2**31, 2**40))
    elif kind == "boolean":
        generated = st.booleans()
    elif kind in ("float", "double"):
        generated = st.floats(allow_nan=False, allow_infinity=False, width=32)
    else:  # timestamp, blob: none in these inputs' paths that matter
        return st.just(base) if base is not None else st.nothing()
    if base is None:
        return generated
    # the baseline mostly: a request then breaks one or two fields, and reaches the rules past the service model
    return st.sampled_from(_KEEP).flatmap(lambda keep: st.just(base) if keep else generated)


def tree(root: Path) -> dict[str, Any]:
    """Every entry below `root` (and root itself): its kind, mode, and bytes or link target."""
    out: dict[str, Any] = {}
    for path in [root, *sorted(root.rglob("*"))]:
        st_ = path.lstat()
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_dir():
            out[rel] = ("dir", st_.st_mode, st_.st_uid)
        else:
            out[rel] = ("file", st_.st_mode, st_.st_uid, path.read_bytes())
    return out


@pytest.fixture(scope="module")
def arena(moto_endpoint: str) -> Iterator[tuple[Served, Path]]:
    """A serve whose jobs folder has a sentinel tree beside it; started by root with --run-as nobody where we are
    root (what serve's documented set-up is), else as this user."""
    folder = Path(tempfile.mkdtemp(prefix="smdist-fuzz-"))
    folder.chmod(0o755)
    sentinel = folder / "sentinel"
    (sentinel / "sub").mkdir(parents=True)
    (sentinel / "a.txt").write_bytes(b"sentinel a\n")
    (sentinel / "sub" / "b.bin").write_bytes(bytes(range(256)))
    (sentinel / "link").symlink_to("a.txt")
    deep = folder.joinpath(*(f"n{i}" for i in range(NESTING)))
    jobs, tmp = deep / "jobs", deep / "tmp"
    for made in (jobs, tmp):
        made.mkdir(parents=True)
    for made in folder.rglob("*"):  # every user may pass (--run-as nobody), as in test_auth's run_as_serve
        if made.is_dir() and not made.is_symlink():
            made.chmod(0o755)
    extra: tuple[str, ...] = ()
    python, environ = sys.executable, {}
    if os.geteuid() == 0 and shutil.which("setpriv"):
        from run_as import python_for_everyone

        python, environ = python_for_everyone()
        extra = ("--run-as", "nobody")
    try:  # serve's own temporary folders (each job's code) inside the tree too
        with running_serve(moto_endpoint, jobs, "process", *extra, python=python,
                           environ={**environ, "TMPDIR": str(tmp)}) as served:
            yield served, folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _clients(served: Served) -> dict[str, Any]:
    import boto3
    from botocore.config import Config

    # parameter_validation off: botocore's client would refuse some values itself; serve must see them as sent
    config = Config(parameter_validation=False, retries={"max_attempts": 1}, read_timeout=120)
    return {s: boto3.client(s, region_name=REGION, endpoint_url=str(served), config=config)
            for s in ("sagemaker", "logs")}


class Calls:
    """Every request made and what came back; the invariants on each answer."""

    def __init__(self) -> None:
        self.count = 0
        self.accepted: list[str] = []

    def __call__(self, client: Any, operation: str, **params: Any) -> dict[str, Any] | None:
        self.count += 1
        try:
            answer = getattr(client, operation)(**params)
        except ClientError as exc:
            status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
            message = str(exc.response.get("Error", {}).get("Message", ""))
            assert status < 500, (operation, status, message)
            assert "Traceback" not in message and 'File "' not in message, message
            return None
        # a job's own failure reason and log lines may quote its script's traceback, as on SageMaker: not serve's
        text = json.dumps({k: v for k, v in answer.items() if k not in ("FailureReason", "events")}, default=str)
        assert "Traceback" not in text, text
        return answer


def _one_example(data: st.DataObject, fuzz: dict[str, Any]) -> None:
    from smdist_launcher.serve.protocol import service_model

    calls, clients, hostile = fuzz["calls"], fuzz["clients"], fuzz["hostile"]
    fuzz["examples"] += 1
    name = f"fuzz-{fuzz['examples']}"
    base = data.draw(st.sampled_from(_baselines(name)), label="baseline")
    shape = service_model("sagemaker").operation_model("CreateTrainingJob").input_shape
    request = data.draw(from_shape(shape, hostile, base), label="CreateTrainingJob")
    if len(json.dumps(request)) > BODY_LIMIT:
        return
    sagemaker, logs = clients["sagemaker"], clients["logs"]
    if calls(sagemaker, "create_training_job", **request) is not None:
        calls.accepted.append(request["TrainingJobName"])
    asked = data.draw(st.one_of(st.just(request["TrainingJobName"]), st.sampled_from(hostile)), label="asked")
    calls(sagemaker, "describe_training_job", TrainingJobName=asked)
    stream = data.draw(st.one_of(st.sampled_from(hostile).map(lambda h: f"{asked}/{h}"),
                                 st.sampled_from(hostile), st.just(f"{asked}/algo-1-1")), label="stream")
    group = data.draw(st.one_of(st.just(LOG_GROUP), st.sampled_from(hostile)), label="group")
    calls(logs, "get_log_events", logGroupName=group, logStreamName=stream, startFromHead=True)
    calls(sagemaker, "stop_training_job", TrainingJobName=asked)


def test_hostile_requests_change_nothing_outside_the_jobs_folder(arena: tuple[Served, Path], moto_endpoint: str,
                                                                 record_property: Any) -> None:
    served, folder = arena
    with pytest.MonkeyPatch.context() as mp:
        use_client_environment(mp, served, moto_endpoint)
        fuzz = {"calls": Calls(), "clients": _clients(served), "hostile": hostile_strings(folder),
                "examples": 0}
        before = tree(folder / "sentinel")

        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                         HealthCheck.large_base_example])
        @given(data=st.data())
        def fuzzing(data: st.DataObject) -> None:
            _one_example(data, fuzz)

        fuzzing()
        calls, sagemaker = fuzz["calls"], fuzz["clients"]["sagemaker"]
        deadline = time.monotonic() + 120
        for name in calls.accepted:  # every accepted job ends (stopped, or failed staging) before the comparison
            while True:
                described = calls(sagemaker, "describe_training_job", TrainingJobName=name)
                if described is None or described["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"):
                    break
                assert time.monotonic() < deadline, described
                time.sleep(0.2)
        assert tree(folder / "sentinel") == before
        assert sorted(p.name for p in folder.iterdir()) == ["n0", "sentinel"]
        assert "TrainingJobSummaries" in sagemaker.list_training_jobs()  # serve still answers
    record_property("fuzz_requests", calls.count)
    record_property("fuzz_accepted_jobs", len(calls.accepted))
    print(f"[fuzz] {calls.count} requests over {fuzz['examples']} examples; {len(calls.accepted)} jobs accepted")
