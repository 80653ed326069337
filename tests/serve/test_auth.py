"""Who may call `smdist serve`, through real HTTP and real boto3 clients: unsigned, wrongly signed, unknown-key and
stale requests are refused with the API's error shapes for every operation and change nothing; foreign Host headers
are refused and no CORS header is sent; another local user gets nowhere; --run-as runs jobs as that user."""
from __future__ import annotations

import datetime
import http.client
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from run_as import python_for_everyone
from smdist_launcher.backends.sagemaker.logs import LOG_GROUP

from .conftest import REGION, Served, running_serve, use_client_environment
from .test_serve import _request, _unique, _wait, signed_request

pytestmark = pytest.mark.timeout(600)

EXPIRED = ("InvalidSignatureException", "Signature expired")
CASES = {  # how a caller gets it wrong → (error code, start of its message)
    "unsigned": ("MissingAuthenticationTokenException", "Missing Authentication Token"),
    "unknown key": ("UnrecognizedClientException", "The security token included in the request is invalid"),
    "wrong secret": ("InvalidSignatureException", "The request signature we calculated does not match"),
    "stale date": EXPIRED,
    "future date": ("InvalidSignatureException", "Signature not yet current"),
}
OPERATIONS = ["CreateTrainingJob", "DescribeTrainingJob", "StopTrainingJob", "ListTrainingJobs", "GetLogEvents"]


def _profile_keys() -> tuple[str, str]:
    import boto3

    creds = boto3.Session().get_credentials()
    return creds.access_key, creds.secret_key


def _job_processes(name: str) -> list[int]:
    """Processes of any job named `name` (each carries SMDIST_JOB_ID=<name>-<id> in its environment)."""
    needle = f"\0SMDIST_JOB_ID={name}-".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in b"\0" + (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def served_env(serve_endpoint: Served, moto_endpoint: str) -> Iterator[Served]:
    """The session serve's documented client environment, for this module's long-lived job."""
    with pytest.MonkeyPatch.context() as mp:
        use_client_environment(mp, serve_endpoint, moto_endpoint)
        yield serve_endpoint


@pytest.fixture(scope="module")
def running_job(served_env: Served, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A one-host job that sleeps (started by the rightful owner): what refused requests try to describe and stop."""
    import boto3

    s3 = boto3.client("s3", region_name=REGION)
    bucket = _unique("auth")
    s3.create_bucket(Bucket=bucket)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        from .test_serve import TRAIN

        info = tarfile.TarInfo("train.py")
        info.size = len(TRAIN.encode())
        tar.addfile(info, io.BytesIO(TRAIN.encode()))
    s3.put_object(Bucket=bucket, Key="code/sourcedir.tar.gz", Body=buf.getvalue())
    s3.put_object(Bucket=bucket, Key="data/train/part-0.txt", Body=b"1\n")
    pids = tmp_path_factory.mktemp("auth-pids")
    sagemaker, logs = boto3.client("sagemaker", region_name=REGION), boto3.client("logs", region_name=REGION)
    name = _unique("auth-target")
    request = _request(bucket, name, MODE="sleep", PIDS_DIR=str(pids))
    request["ResourceConfig"]["InstanceCount"] = 1
    sagemaker.create_training_job(**request)
    deadline = time.monotonic() + 120
    while not list(pids.iterdir()):
        assert time.monotonic() < deadline, sagemaker.describe_training_job(TrainingJobName=name)
        time.sleep(0.2)
    stream = logs.describe_log_streams(logGroupName=LOG_GROUP, logStreamNamePrefix=f"{name}/")["logStreams"][0]
    yield {"name": name, "bucket": bucket, "stream": stream["logStreamName"]}
    sagemaker.stop_training_job(TrainingJobName=name)
    _wait(sagemaker, name)


def _bad_client(service: str, case: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A real boto3 client that gets authentication wrong in the way `case` says."""
    import boto3
    import botocore.auth
    from botocore import UNSIGNED
    from botocore.config import Config

    config = Config(retries={"max_attempts": 1})
    access, secret = _profile_keys()
    if case == "unsigned":
        return boto3.client(service, region_name=REGION, config=config.merge(Config(signature_version=UNSIGNED)))
    if case == "unknown key":
        return boto3.client(service, region_name=REGION, config=config, aws_access_key_id="SMDSNOTAKEYOFSERVE22",
                            aws_secret_access_key=secret)
    if case == "wrong secret":
        return boto3.client(service, region_name=REGION, config=config, aws_access_key_id=access,
                            aws_secret_access_key="x" * 40)
    # the rightful key, but the caller's clock (so its X-Amz-Date) is 20 minutes off
    shift = datetime.timedelta(minutes=-20 if case == "stale date" else 20)
    real = botocore.auth.get_current_datetime
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda *a, **k: real(*a, **k) + shift)
    return boto3.client(service, region_name=REGION, config=config, aws_access_key_id=access,
                        aws_secret_access_key=secret)


def _call(operation: str, client_of: Callable[[str], Any], job: dict[str, str], new_name: str) -> Any:
    if operation == "CreateTrainingJob":
        return client_of("sagemaker").create_training_job(**_request(job["bucket"], new_name))
    if operation == "DescribeTrainingJob":
        return client_of("sagemaker").describe_training_job(TrainingJobName=job["name"])
    if operation == "StopTrainingJob":
        return client_of("sagemaker").stop_training_job(TrainingJobName=job["name"])
    if operation == "ListTrainingJobs":
        return client_of("sagemaker").list_training_jobs()
    return client_of("logs").get_log_events(logGroupName=LOG_GROUP, logStreamName=job["stream"], startFromHead=True)


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_badly_authenticated_request_is_refused_and_changes_nothing(
        operation: str, case: str, running_job: dict[str, str], served_env: Served,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    new_name = _unique("auth-refused")
    with pytest.raises(ClientError) as info:
        _call(operation, lambda service: _bad_client(service, case, monkeypatch), running_job, new_name)
    monkeypatch.undo()  # the caller's clock back for the checks below
    error = info.value.response["Error"]
    code, message = CASES[case]
    assert (error["Code"], info.value.response["ResponseMetadata"]["HTTPStatusCode"]) == (code, 400)
    assert error["Message"].startswith(message), error
    assert "TrainingJobSummaries" not in info.value.response and "events" not in info.value.response
    # nothing created, nothing stopped, nothing running
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    assert not (served_env.jobs / new_name).exists()
    assert sagemaker.list_training_jobs(NameContains=new_name)["TrainingJobSummaries"] == []
    assert _job_processes(new_name) == []
    described = sagemaker.describe_training_job(TrainingJobName=running_job["name"])
    assert described["TrainingJobStatus"] == "InProgress" and not any(
        t["Status"] == "Stopping" for t in described["SecondaryStatusTransitions"])


def test_a_body_changed_after_signing_is_refused(served_env: Served, running_job: dict[str, str]) -> None:
    import urllib.error
    import urllib.request

    signed = signed_request(served_env, "SageMaker.ListTrainingJobs", b"{}")
    forged = _request(running_job["bucket"], _unique("auth-forged"))
    tampered = urllib.request.Request(signed.full_url, data=json.dumps(forged).encode(), method="POST",
                                      headers={**dict(signed.header_items()),
                                               "X-amz-target": "SageMaker.CreateTrainingJob"})
    with pytest.raises(urllib.error.HTTPError) as raw:
        urllib.request.urlopen(tampered, timeout=10)
    assert raw.value.code == 400 and json.loads(raw.value.read())["__type"] == "InvalidSignatureException"
    assert not (served_env.jobs / forged["TrainingJobName"]).exists()


def test_a_request_signed_for_another_region_is_refused(served_env: Served) -> None:
    import boto3

    other = boto3.client("sagemaker", region_name="eu-west-1", endpoint_url=served_env.client_env[
        "AWS_ENDPOINT_URL_SAGEMAKER"])  # serve's key, another region in the credential scope
    with pytest.raises(ClientError) as info:
        other.list_training_jobs()
    assert info.value.response["Error"] == {
        "Code": "InvalidSignatureException", "Message": "Credential should be scoped to a valid region, not "
                                                        "'eu-west-1'. "}


def test_a_foreign_host_header_is_refused_and_no_cors_header_is_sent(served_env: Served) -> None:
    import boto3

    port = int(served_env.rsplit(":", 1)[1])
    credentials = boto3.Session().get_credentials()
    # validly signed by the key's owner, but for the name a DNS-rebinding page would carry
    body = b"{}"
    forged = signed_request(f"http://rebound.attacker.example:{port}", "SageMaker.ListTrainingJobs", body,
                            credentials=credentials, headers={"Origin": "http://rebound.attacker.example"})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/", body=body, headers={**dict(forged.header_items()),
                                                  "Host": f"rebound.attacker.example:{port}"})
    answer = conn.getresponse()
    payload = json.loads(answer.read())
    assert answer.status == 403 and payload["__type"] == "AccessDeniedException", payload
    assert "rebound.attacker.example" in payload["message"]
    assert not [h for h in answer.headers if h.lower().startswith("access-control-")]
    # a CORS preflight gets no Access-Control-* header either: a browser never lets a page send the real request
    conn.request("OPTIONS", "/", headers={"Origin": "http://rebound.attacker.example",
                                          "Access-Control-Request-Method": "POST",
                                          "Access-Control-Request-Headers": "x-amz-target,authorization"})
    answer = conn.getresponse()
    answer.read()
    assert answer.status == 405 and not [h for h in answer.headers if h.lower().startswith("access-control-")]
    conn.close()
    # the same request signed for serve's own address passes
    own = signed_request(served_env, "SageMaker.ListTrainingJobs", body, credentials=credentials)
    import urllib.request

    with urllib.request.urlopen(own, timeout=10) as ok:
        assert "TrainingJobSummaries" in json.loads(ok.read())


def test_the_profile_is_written_for_the_owner_only(served_env: Served) -> None:
    credentials = Path(served_env.client_env["AWS_SHARED_CREDENTIALS_FILE"])
    assert credentials.stat().st_mode & 0o777 == 0o600
    assert f"[{served_env.client_env['AWS_PROFILE']}]" in credentials.read_text()
    assert set(served_env.client_env) == {"AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_DEFAULT_REGION",
                                          "AWS_ENDPOINT_URL_SAGEMAKER", "AWS_ENDPOINT_URL_CLOUDWATCH_LOGS",
                                          "AWS_ENDPOINT_URL_CLOUDWATCH"}


# ---- another local user; --run-as ---------------------------------------------------------------------------------
WHOAMI = r'''
import json, os
print(f"uid {os.getuid()} gid {os.getgid()} groups {os.getgroups()}", flush=True)
with open(os.path.join(os.environ["SM_MODEL_DIR"], "whoami.json"), "w") as f:
    json.dump({"uid": os.getuid(), "gid": os.getgid(), "home": os.environ["HOME"]}, f)
'''
# What "nobody" tries: read serve's key, call serve unsigned, call it signed with a key it made up.
INTRUDER = r'''
import json, os, sys, urllib.request, urllib.error
out = {}
try:
    open(os.environ["AWS_SHARED_CREDENTIALS_FILE"]).read()
    out["read_key"] = True
except OSError as e:
    out["read_key"] = type(e).__name__
url, body = os.environ["AWS_ENDPOINT_URL_SAGEMAKER"], sys.argv[1].encode()
req = urllib.request.Request(url, data=body, method="POST", headers={
    "X-Amz-Target": "SageMaker.CreateTrainingJob", "Content-Type": "application/x-amz-json-1.1"})
try:
    urllib.request.urlopen(req, timeout=30)
    out["unsigned"] = "accepted"
except urllib.error.HTTPError as e:
    out["unsigned"] = [e.code, json.loads(e.read())["__type"]]
import boto3
from botocore.exceptions import ClientError, ProfileNotFound
try:
    boto3.client("sagemaker", region_name="us-east-1").list_training_jobs()
    out["profile"] = "accepted"
except (ClientError, ProfileNotFound, Exception) as e:
    out["profile"] = type(e).__name__
os.environ.pop("AWS_PROFILE")  # a profile of its own would not be found either: sign with a made-up key
sm = boto3.client("sagemaker", region_name="us-east-1", aws_access_key_id="SMDSGUESSEDKEY000000",
                  aws_secret_access_key="guessed" * 5)
try:
    sm.create_training_job(**json.loads(sys.argv[1]))
    out["guessed"] = "accepted"
except ClientError as e:
    out["guessed"] = e.response["Error"]["Code"]
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def run_as_serve(moto_endpoint: str, serve_endpoint: Served) -> Iterator[Served]:
    """A serve started by root with --run-as nobody, its jobs and key in a folder every user may enter (so only the
    key file's own mode keeps it private)."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv")
    python, environ = python_for_everyone()
    folder = Path(tempfile.mkdtemp(prefix="smdist-serve-runas-"))
    folder.chmod(0o755)
    try:
        with running_serve(moto_endpoint, folder, "process", "--run-as", "nobody", python=python,
                           environ=environ) as served:
            served.python, served.python_env = python, environ
            yield served
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _upload_code(bucket: str, files: dict[str, str]) -> None:
    import boto3

    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=bucket)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    s3.put_object(Bucket=bucket, Key="code/sourcedir.tar.gz", Body=buf.getvalue())
    s3.put_object(Bucket=bucket, Key="data/train/part-0.txt", Body=b"1\n")


def test_another_local_user_is_refused_and_nothing_runs(run_as_serve: Served, moto_endpoint: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3

    use_client_environment(monkeypatch, run_as_serve, moto_endpoint)
    bucket = _unique("intruder")
    _upload_code(bucket, {"train.py": WHOAMI})
    name = _unique("intruded")
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", **run_as_serve.python_env,
           **run_as_serve.client_env}  # everything the owner's shell has, but another user's process
    done = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", run_as_serve.python, "-c",
                           INTRUDER, json.dumps(_request(bucket, name))], env=env, capture_output=True, text=True,
                          timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    # the key file is the owner's alone; the profile names nothing another user can read
    assert seen == {"read_key": "PermissionError", "unsigned": [400, "MissingAuthenticationTokenException"],
                    "profile": "ProfileNotFound", "guessed": "UnrecognizedClientException"}, seen
    time.sleep(1)  # a job started by mistake would have its folder by now
    assert not (run_as_serve.jobs / name).exists() and _job_processes(name) == []
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    assert sagemaker.list_training_jobs(NameContains=name)["TrainingJobSummaries"] == []


def test_run_as_nobody_runs_the_script_as_nobody_and_its_outputs_land(run_as_serve: Served, moto_endpoint: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    import boto3

    use_client_environment(monkeypatch, run_as_serve, moto_endpoint)
    nobody = pwd.getpwnam("nobody")
    bucket = _unique("runas")
    _upload_code(bucket, {"train.py": WHOAMI})
    name = _unique("served-runas")
    request = _request(bucket, name)
    request["ResourceConfig"]["InstanceCount"] = 1
    sagemaker, s3 = boto3.client("sagemaker", region_name=REGION), boto3.client("s3", region_name=REGION)
    sagemaker.create_training_job(**request)
    done = _wait(sagemaker, name)
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    body = s3.get_object(Bucket=bucket, Key=f"output/{name}/output/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        seen = json.load(tar.extractfile(next(m for m in tar.getmembers() if m.name.endswith("whoami.json"))))
    assert (seen["uid"], seen["gid"]) == (nobody.pw_uid, nobody.pw_gid)
    log = (run_as_serve.jobs / name / "logs" / "algo-1.log").read_text()
    assert f"uid {nobody.pw_uid} gid {nobody.pw_gid} groups []" in log
    host = run_as_serve.jobs / name / "hosts" / "algo-1"
    assert host.stat().st_uid == nobody.pw_uid and (host / "opt" / "ml" / "code").stat().st_uid == nobody.pw_uid
    assert "as user nobody" in (run_as_serve.jobs / "serve.log").read_text()


@pytest.mark.parametrize("header", ["127.0.0.1:80@rebound.attacker.example", "localhost:rebound.attacker.example",
                                    "[::1]rebound.attacker.example", "localhost:", "[::1", "127.0.0.1."])
def test_a_host_header_that_only_starts_like_serves_address_is_refused(header: str) -> None:
    """The old parse took whatever came before the one ':' (or inside the brackets) as the name."""
    from smdist_launcher.serve.auth import check_host, own_host_names
    from smdist_launcher.serve.protocol import ApiError

    with pytest.raises(ApiError):
        check_host(header, own_host_names("127.0.0.1"), "127.0.0.1")
    for own in ("127.0.0.1:8080", "LOCALHOST", "[::1]:8080", "::1"):
        check_host(own, own_host_names("127.0.0.1"), "127.0.0.1")
