"""SageMaker's metric reads through `smdist serve`, with boto3: DescribeTrainingJob's FinalMetricDataList and the
CloudWatch reads (ListMetrics, GetMetricStatistics) of a served job whose request had MetricDefinitions. The SDK's
own TrainingJobAnalytics is in test_sdk_client.py."""
from __future__ import annotations

import datetime as dt
import io
import json
import tarfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from smdist_launcher.metrics.store import STORE_FILE, SYSTEM, MetricPoint, MetricWriter

from .conftest import REGION, Served, use_client_environment
from .test_serve import TRAIN, _request, _unique, _wait

NAMESPACE = "/aws/sagemaker/TrainingJobs"
# TRAIN prints "hello from algo-N" on each host: the host's number is the metric's value there.
DEFINITIONS = [{"Name": "host:number", "Regex": "hello from algo-([0-9]+)"},
               {"Name": "never:printed", "Regex": "no line says this ([0-9]+)"}]
ALL_STATISTICS = ["SampleCount", "Sum", "Minimum", "Maximum", "Average"]


@pytest.fixture(scope="module")
def metrics_job(serve_endpoint: Served, moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """One completed 2-host served job with MetricDefinitions (created once for every test here)."""
    mp = pytest.MonkeyPatch()
    use_client_environment(mp, serve_endpoint, moto_endpoint)
    clients = {s: boto3.client(s, region_name=REGION) for s in ("sagemaker", "s3")}
    bucket = _unique("serve-metrics")
    clients["s3"].create_bucket(Bucket=bucket)
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        info = tarfile.TarInfo("train.py")
        info.size = len(TRAIN.encode())
        tar.addfile(info, io.BytesIO(TRAIN.encode()))
    clients["s3"].put_object(Bucket=bucket, Key="code/sourcedir.tar.gz", Body=archive.getvalue())
    clients["s3"].put_object(Bucket=bucket, Key="data/train/part-0.txt", Body=b"1 2 3\n")
    name = _unique("served-metrics")
    request = _request(bucket, name)
    request["AlgorithmSpecification"]["MetricDefinitions"] = DEFINITIONS
    clients["sagemaker"].create_training_job(**request)
    done = _wait(clients["sagemaker"], name)
    mp.undo()
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    return name


@pytest.fixture()
def cloudwatch(clients: dict[str, Any], serve_endpoint: Served) -> Any:
    """A CloudWatch client as a user's shell makes it from serve's `export` line (AWS_ENDPOINT_URL_CLOUDWATCH)."""
    client = boto3.client("cloudwatch", region_name=REGION)
    assert client.meta.endpoint_url == serve_endpoint
    return client


def test_describe_gives_the_final_value_of_each_defined_metric(clients: dict[str, Any], metrics_job: str) -> None:
    described = clients["sagemaker"].describe_training_job(TrainingJobName=metrics_job)
    final = described["FinalMetricDataList"]
    assert [m["MetricName"] for m in final] == ["host:number"]  # a metric no line matched has no value
    assert final[0]["Value"] in (1.0, 2.0)  # the last line of either host
    assert described["CreationTime"] <= final[0]["Timestamp"] <= described["TrainingEndTime"]
    assert described["AlgorithmSpecification"]["MetricDefinitions"] == DEFINITIONS


def test_list_metrics_and_statistics_over_every_host(cloudwatch: Any, clients: dict[str, Any],
                                                     metrics_job: str) -> None:
    dimensions = [{"Name": "TrainingJobName", "Value": metrics_job}]
    listed = cloudwatch.list_metrics(Namespace=NAMESPACE, Dimensions=dimensions)["Metrics"]
    assert listed == [{"Namespace": NAMESPACE, "MetricName": "host:number", "Dimensions": dimensions}]
    described = clients["sagemaker"].describe_training_job(TrainingJobName=metrics_job)
    window = dict(StartTime=described["TrainingStartTime"], EndTime=described["TrainingEndTime"]
                  + dt.timedelta(minutes=1))
    points = cloudwatch.get_metric_statistics(Namespace=NAMESPACE, MetricName="host:number", Dimensions=dimensions,
                                              Period=60, Statistics=ALL_STATISTICS, **window)
    datapoints = points["Datapoints"]
    assert points["Label"] == "host:number" and datapoints
    # both hosts' values, however the minutes split them: algo-1 printed 1, algo-2 printed 2
    assert sum(d["SampleCount"] for d in datapoints) == 2 and sum(d["Sum"] for d in datapoints) == 3
    assert min(d["Minimum"] for d in datapoints) == 1 and max(d["Maximum"] for d in datapoints) == 2
    assert all(d["Unit"] == "None" and d["Timestamp"].second == 0 for d in datapoints)
    p100 = cloudwatch.get_metric_statistics(Namespace=NAMESPACE, MetricName="host:number", Dimensions=dimensions,
                                            Period=3600, ExtendedStatistics=["p100"], **window)["Datapoints"]
    assert max(d["ExtendedStatistics"]["p100"] for d in p100) == 2
    other_job = [{"Name": "TrainingJobName", "Value": "no-such-job"}]
    assert cloudwatch.get_metric_statistics(Namespace=NAMESPACE, MetricName="host:number", Dimensions=other_job,
                                            Period=60, Statistics=["Average"], **window)["Datapoints"] == []


def test_host_metrics_are_under_their_host_dimension(cloudwatch: Any, serve_endpoint: Served,
                                                     metrics_job: str) -> None:
    # Samples of a known value, an hour before the job (the sampler's own samples of this short job, if any, are
    # not in that window): what CloudWatch answers for a host is exactly these.
    at = (time.time() // 3600 - 1) * 3600
    writer = MetricWriter(serve_endpoint.jobs / metrics_job / STORE_FILE)
    writer.write_many([MetricPoint("CPUUtilization", v, at + i, "algo-2", kind=SYSTEM)
                       for i, v in enumerate((10.0, 30.0))])
    writer.close()
    host = [{"Name": "Host", "Value": f"{metrics_job}/algo-2"}]
    listed = cloudwatch.list_metrics(Namespace=NAMESPACE, MetricName="CPUUtilization",
                                     Dimensions=[{"Name": "Host"}])["Metrics"]
    assert {"Namespace": NAMESPACE, "MetricName": "CPUUtilization", "Dimensions": host} in listed
    start = dt.datetime.fromtimestamp(at, dt.timezone.utc)
    answer = cloudwatch.get_metric_statistics(Namespace=NAMESPACE, MetricName="CPUUtilization", Dimensions=host,
                                              StartTime=start, EndTime=start + dt.timedelta(minutes=1), Period=60,
                                              Statistics=["Average", "Maximum"], Unit="Percent")
    assert answer["Datapoints"] == [{"Timestamp": start, "Average": 20.0, "Maximum": 30.0, "Unit": "Percent"}]
    # a training metric's dimension never finds a host metric
    job = [{"Name": "TrainingJobName", "Value": metrics_job}]
    assert cloudwatch.get_metric_statistics(
        Namespace=NAMESPACE, MetricName="CPUUtilization", Dimensions=job, StartTime=start,
        EndTime=start + dt.timedelta(minutes=1), Period=60, Statistics=["Average"])["Datapoints"] == []


def test_cloudwatch_requests_are_checked(cloudwatch: Any, serve_endpoint: Served, metrics_job: str) -> None:
    now = dt.datetime.now(dt.timezone.utc)
    with pytest.raises(ClientError) as info:  # neither Statistics nor ExtendedStatistics
        cloudwatch.get_metric_statistics(Namespace=NAMESPACE, MetricName="host:number", StartTime=now,
                                         EndTime=now + dt.timedelta(minutes=1), Period=60)
    assert info.value.response["Error"]["Code"] == "InvalidParameterCombinationException"
    with pytest.raises(ClientError) as info:  # more than 1440 datapoints
        cloudwatch.get_metric_statistics(Namespace=NAMESPACE, MetricName="host:number", StartTime=now,
                                         EndTime=now + dt.timedelta(days=2), Period=60, Statistics=["Average"])
    assert "exceeds the limit of 1440" in info.value.response["Error"]["Message"]
    # a request botocore's own model refuses (no Period), sent raw and signed as boto3 would sign it
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    body = json.dumps({"Namespace": NAMESPACE, "MetricName": "host:number", "StartTime": now.timestamp(),
                       "EndTime": now.timestamp() + 60}).encode()
    raw = AWSRequest(method="POST", url=serve_endpoint, data=body, headers={
        "X-Amz-Target": "GraniteServiceVersion20100801.GetMetricStatistics",
        "Content-Type": "application/x-amz-json-1.0"})
    SigV4Auth(boto3.Session().get_credentials(), "monitoring", REGION).add_auth(raw)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(serve_endpoint, data=body, method="POST",
                                                      headers=dict(raw.headers.items())), timeout=60)
    assert refused.value.code == 400 and refused.value.headers["Content-Type"] == "application/x-amz-json-1.0"
    answer = json.loads(refused.value.read())
    assert answer["__type"] == "ValidationException" and "Period" in answer["message"]


def test_smdist_metrics_reads_a_sagemaker_job_through_the_same_calls(clients: dict[str, Any], metrics_job: str,
                                                                      tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`smdist metrics NAME` for a job not in the jobs folder asks SageMaker and CloudWatch (here: serve)."""
    from smdist_launcher.cli.main import main

    assert main(["metrics", metrics_job, "--format", "json", "--jobs-dir", str(tmp_path), "--region", REGION]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(s["name"], s["host"]) for s in shown["series"]] == [("host:number", "all")]  # one series: per job
    assert sum(s["count"] for s in shown["summary"]) >= 1 and shown["summary"][0]["max"] <= 2


def test_get_metric_data_answers_metric_stat_queries(cloudwatch: Any, clients: dict[str, Any],
                                                     metrics_job: str) -> None:
    described = clients["sagemaker"].describe_training_job(TrainingJobName=metrics_job)
    window = dict(StartTime=described["TrainingStartTime"], EndTime=described["TrainingEndTime"]
                  + dt.timedelta(minutes=1))
    metric = {"Namespace": NAMESPACE, "MetricName": "host:number",
              "Dimensions": [{"Name": "TrainingJobName", "Value": metrics_job}]}
    answer = cloudwatch.get_metric_data(MetricDataQueries=[
        {"Id": "total", "MetricStat": {"Metric": metric, "Period": 60, "Stat": "Sum"}},
        {"Id": "top", "MetricStat": {"Metric": metric, "Period": 60, "Stat": "p100"}, "Label": "highest"}],
        ScanBy="TimestampAscending", **window)["MetricDataResults"]
    total, top = answer
    assert total["Id"] == "total" and total["StatusCode"] == "Complete" and sum(total["Values"]) == 3
    assert top["Label"] == "highest" and max(top["Values"]) == 2 and top["Timestamps"] == sorted(top["Timestamps"])
    with pytest.raises(ClientError) as info:  # metric math is not answered
        cloudwatch.get_metric_data(MetricDataQueries=[{"Id": "m", "Expression": "SUM(METRICS())"}], **window)
    assert info.value.response["Error"]["Code"] == "InvalidParameterValueException"


def test_a_timestamp_string_and_a_bad_page_token_are_answered_not_a_500(tmp_path: Path) -> None:
    """A raw caller may send a timestamp as a string (botocore's validator takes ISO 8601): float() of it was a 500
    with a Python traceback's words; a NextToken of "-3" paged from the end, one of 5,000 digits was a 500."""
    from smdist_launcher.serve.jobs import Settings
    from smdist_launcher.serve.server import Endpoint

    endpoint = Endpoint(Settings(jobs_dir=tmp_path))
    statistics = {"Namespace": NAMESPACE, "MetricName": "loss", "StartTime": "2026-01-01T00:00:00Z",
                  "EndTime": "2026-01-01T01:00:00Z", "Period": 60, "Statistics": ["Average"]}
    data = {"MetricDataQueries": [{"Id": "q", "MetricStat": {"Metric": {"Namespace": NAMESPACE, "MetricName": "loss"},
                                                           "Period": 60, "Stat": "Average"}}],
            "StartTime": "2026-01-01T00:00:00Z", "EndTime": "1767229200"}
    for operation, params in (("GetMetricStatistics", statistics), ("GetMetricData", data)):
        status, body = endpoint.call(f"GraniteServiceVersion20100801.{operation}", json.dumps(params).encode())
        assert status == 200, body
    for token in ("-3", " 1", "1_0", "9" * 5000):
        status, body = endpoint.call("GraniteServiceVersion20100801.ListMetrics",
                                     json.dumps({"NextToken": token}).encode())
        assert (status, json.loads(body)["__type"]) == (400, "InvalidNextToken"), (token, body)


def _served_store(tmp_path: Path, name: str, lines: int) -> tuple[Any, Path]:
    """JobMetrics over one served job whose store holds `lines` training points (loss = i / 10) and as many host
    samples."""
    from types import SimpleNamespace

    from smdist_launcher.serve.jobs import Jobs, ServedJob, Settings
    from smdist_launcher.serve.metrics import JobMetrics

    job_dir = tmp_path / name
    job_dir.mkdir()
    store = job_dir / STORE_FILE
    store.write_text("".join(MetricPoint("loss", i / 10, 1.7e9 + i, "algo-1", 0).to_json() + "\n"
                             + MetricPoint("CPUUtilization", 50.0, 1.7e9 + i, "algo-1", None, kind=SYSTEM).to_json()
                             + "\n" for i in range(lines)))
    jobs = Jobs(Settings(jobs_dir=tmp_path))
    served = ServedJob({"TrainingJobName": name})
    served.local = SimpleNamespace(job_dir=str(job_dir))   # what the metrics reads use of a running job
    jobs._jobs[name] = served
    return JobMetrics(jobs), store


def test_cloudwatch_reads_hold_what_they_answer_not_the_store(tmp_path: Path) -> None:
    """ListMetrics and GetMetricStatistics read the store a line at a time: the peak is what they answer (the
    series; the points in the asked range), a fraction of a chatty job's store (they loaded it whole, as
    DescribeTrainingJob did)."""
    import tracemalloc

    metrics, store = _served_store(tmp_path, "chatty", 20_000)
    tracemalloc.start()
    try:
        listed = metrics.list_metrics({"Namespace": NAMESPACE})["Metrics"]
        stats = metrics.statistics({"Namespace": NAMESPACE, "MetricName": "loss", "StartTime": 1.7e9 + 19_900,
                                    "EndTime": 1.7e9 + 20_000, "Period": 60, "Statistics": ["Maximum", "SampleCount"],
                                    "Dimensions": [{"Name": "TrainingJobName", "Value": "chatty"}]})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sorted((m["MetricName"], m["Dimensions"][0]["Value"]) for m in listed) == [
        ("CPUUtilization", "chatty/algo-1"), ("loss", "chatty")]
    assert sum(d["SampleCount"] for d in stats["Datapoints"]) == 100
    assert max(d["Maximum"] for d in stats["Datapoints"]) == 1999.9
    assert peak < store.stat().st_size / 4, (peak, store.stat().st_size)


def test_final_metrics_read_only_what_the_store_gained(tmp_path: Path) -> None:
    """DescribeTrainingJob (every client's wait() polls it) read a job's whole metrics store each time, into memory:
    a job printing a metric line in a loop grows it by gigabytes (a 43 MB store took 250 MB a call). Now a bounded
    read of the lines it gained: the peak stays a fraction of the store, and a line still being written waits."""
    import tracemalloc
    from types import SimpleNamespace

    from smdist_launcher.serve.jobs import Jobs, ServedJob, Settings
    from smdist_launcher.serve.metrics import JobMetrics

    job_dir = tmp_path / "chatty"
    job_dir.mkdir()
    store = job_dir / STORE_FILE
    store.write_text("".join(MetricPoint("loss", i / 10, 1.7e9 + i, "algo-1", 0).to_json() + "\n"
                             for i in range(40_000)))
    jobs = Jobs(Settings(jobs_dir=tmp_path))
    served = ServedJob({"TrainingJobName": "chatty"})
    served.local = SimpleNamespace(job_dir=str(job_dir))   # what the metrics reads use of a running job
    jobs._jobs["chatty"] = served
    metrics = JobMetrics(jobs)
    described = {"TrainingJobName": "chatty",
                 "AlgorithmSpecification": {"MetricDefinitions": [{"Name": "loss", "Regex": "loss=(.*)"}]}}
    tracemalloc.start()
    try:
        final = metrics.with_final_metrics(described)["FinalMetricDataList"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert final == [{"MetricName": "loss", "Value": 3999.9, "Timestamp": 1.7e9 + 39_999}]
    assert peak < store.stat().st_size / 4, (peak, store.stat().st_size)
    newer = MetricPoint("loss", 0.25, 1.8e9, "algo-1", 1).to_json()
    with store.open("a") as f:
        f.write(newer[:20])   # torn: the writer is mid-line
    assert metrics.with_final_metrics(described)["FinalMetricDataList"][0]["Value"] == 3999.9
    with store.open("a") as f:
        f.write(newer[20:] + "\n")
    assert metrics.with_final_metrics(described)["FinalMetricDataList"] == [
        {"MetricName": "loss", "Value": 0.25, "Timestamp": 1.8e9}]
