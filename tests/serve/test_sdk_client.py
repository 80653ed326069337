"""The official SageMaker Python SDK (v2), unchanged, as a client of `smdist serve`: PyTorch(...).fit(wait=True,
logs="All") trains examples/mnist on 2 simulated hosts and its model lands in S3; its metric_definitions give
FinalMetricDataList and TrainingJobAnalytics' dataframe (CloudWatch reads); stop and attach work."""
from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mnist"
BUCKET = "sagemaker-us-east-1-123456789012"
ROLE = "arn:aws:iam::123456789012:role/SageMakerTraining"
# examples/mnist prints "epoch 1 step 0/2 loss 2.3012" (rank 0)
LOSS = {"Name": "train:loss", "Regex": "loss ([0-9.]+)"}


@pytest.fixture(scope="module")
def sdk() -> Any:
    mp = pytest.MonkeyPatch()
    mp.setenv("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    sagemaker = pytest.importorskip("sagemaker")
    import sagemaker.telemetry.telemetry_logging as telemetry

    mp.setattr(telemetry, "_requests_helper", lambda *a, **k: None)  # no network from the tests
    yield sagemaker
    mp.undo()


@pytest.fixture()
def session(sdk: Any, clients: dict[str, Any]) -> Any:
    import boto3

    s3 = clients["s3"]
    try:
        s3.create_bucket(Bucket=BUCKET)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    # the default bucket given: the SDK would ask STS at its public endpoint otherwise
    return _quick_polls(sdk.Session)(boto_session=boto3.Session(region_name="us-east-1"), default_bucket=BUCKET)


def _quick_polls(session_class: Any) -> Any:
    """The SDK's own Session with its `poll` parameters at 1 s instead of 5-10 s: a user may pass them too. The
    requests are the same, only more of them; a test's job of seconds no longer waits out 10-second sleeps."""

    class QuickPolls(session_class):  # type: ignore[misc, valid-type]
        def logs_for_job(self, job_name: str, wait: bool = False, poll: int = 1, log_type: str = "All",
                         timeout: int | None = None) -> Any:
            return super().logs_for_job(job_name, wait, poll, log_type, timeout)

        def wait_for_job(self, job: str, poll: int = 1) -> Any:
            return super().wait_for_job(job, poll)

    return QuickPolls


def _estimator(session: Any, **extra: Any) -> Any:
    from sagemaker.pytorch import PyTorch

    return PyTorch(entry_point="train.py", source_dir=str(EXAMPLE), role=ROLE, instance_type="ml.g5.xlarge",
                   instance_count=2, framework_version="2.3.0", py_version="py311", sagemaker_session=session,
                   distribution={"torch_distributed": {"enabled": True}}, **extra)


@pytest.mark.slow
@pytest.mark.timeout(600)  # two torchrun hosts and the SDK's log streams on a busy 2-core machine
def test_sdk_fit_trains_mnist_and_the_model_lands_in_s3(session: Any, clients: dict[str, Any], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    subprocess.run([sys.executable, str(EXAMPLE / "make_data.py"), str(tmp_path / "mnist"), "--train", "128",
                    "--test", "32"], check=True, timeout=300)
    data = session.upload_data(str(tmp_path / "mnist"), bucket=BUCKET, key_prefix="mnist")
    est = _estimator(session, hyperparameters={"epochs": 1, "batch-size": 32}, metric_definitions=[LOSS])
    name = f"sdk-mnist-{time.monotonic_ns() % 10**10}"
    est.fit({"training": f"{data}/train", "test": f"{data}/test"}, job_name=name, wait=True, logs="All")

    assert est.model_data == f"s3://{BUCKET}/{name}/output/model.tar.gz"
    body = clients["s3"].get_object(Bucket=BUCKET, Key=f"{name}/output/model.tar.gz")["Body"]
    with tarfile.open(fileobj=body, mode="r|gz") as tar:
        assert any(m.name.endswith((".pt", ".pth")) for m in tar)
    out = capsys.readouterr().out
    assert "algo-1" in out and "algo-2" in out  # the SDK printed both hosts' CloudWatch streams

    printed = [float(v) for v in re.findall(LOSS["Regex"], out)]
    final = est.latest_training_job.describe()["FinalMetricDataList"]
    assert [(m["MetricName"], m["Value"]) for m in final] == [("train:loss", printed[-1])]
    from sagemaker.analytics import TrainingJobAnalytics

    frame = TrainingJobAnalytics(name, metric_names=["train:loss"], sagemaker_session=session).dataframe()
    assert list(frame.columns) == ["timestamp", "metric_name", "value"] and set(frame["metric_name"]) == {"train:loss"}
    # one row a minute (the average of its values), however the job's lines fell into minutes
    assert 1 <= len(frame) <= len(printed) and min(printed) <= frame["value"].min() <= frame["value"].max() <= max(
        printed)
    assert est.training_job_analytics.dataframe().equals(frame)  # metric names from the job's MetricDefinitions

    attached = type(est).attach(name, sagemaker_session=session)
    assert attached.model_data == est.model_data and attached.instance_count == 2


def test_sdk_stop_then_attach(session: Any, clients: dict[str, Any], tmp_path: Path) -> None:
    train = tmp_path / "src" / "train.py"
    train.parent.mkdir()
    train.write_text("import time\nprint('waiting', flush=True)\ntime.sleep(600)\n")
    from sagemaker.pytorch import PyTorch

    est = PyTorch(entry_point="train.py", source_dir=str(train.parent), role=ROLE, instance_type="ml.g5.xlarge",
                  instance_count=2, framework_version="2.3.0", py_version="py311", sagemaker_session=session)
    name = f"sdk-stop-{time.monotonic_ns() % 10**10}"
    est.fit(job_name=name, wait=False)
    est.latest_training_job.stop()
    attached = PyTorch.attach(name, sagemaker_session=session)  # waits for the end, as the SDK's attach does
    assert attached.latest_training_job.describe()["TrainingJobStatus"] == "Stopped"
