"""A request's MetricDefinitions regexes on serve: they are compiled at create with the engine that searches the
job's lines (the `regex` package), and a catastrophic one cannot freeze serve (each search is bounded in time and
releases the GIL; metrics/definitions.py): serve keeps answering, the metric is disabled, the others go on."""
from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import pytest

from smdist_launcher.serve.jobs import Settings

from .test_request_attacks import _NotRun, _refusal
from .test_serve import _request, _unique, _wait

pytestmark = pytest.mark.timeout(300)

# With Python's `re`, `(a|aa)+$` on this line backtracks for hours holding the GIL: every serve call froze.
PRINTS = r'''
print("a" * 60 + "!", flush=True)
print("value 7", flush=True)
'''
DEFINITIONS = [{"Name": "redos", "Regex": r"(a|aa)+$"}, {"Name": "value", "Regex": r"value ([0-9]+)"}]


@pytest.mark.filterwarnings("ignore::FutureWarning")  # re reads `[[` as a possible nested set, and warns
def test_a_regex_only_python_re_compiles_is_refused_at_create(tmp_path: Path) -> None:
    request = _request("smdist-attack", "re-engine")
    request["AlgorithmSpecification"]["MetricDefinitions"] = [{"Name": "posix", "Regex": "[[:foo:]]"}]
    message = _refusal(_NotRun(Settings(jobs_dir=tmp_path)), request)
    assert "AlgorithmSpecification.MetricDefinitions[0].Regex" in message and "[[:foo:]]" in message, message


def test_a_catastrophic_metric_regex_does_not_freeze_serve(clients: dict[str, Any]) -> None:
    sagemaker, s3 = clients["sagemaker"], clients["s3"]
    bucket = _unique("serve-redos")
    s3.create_bucket(Bucket=bucket)
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        info = tarfile.TarInfo("train.py")
        info.size = len(PRINTS.encode())
        tar.addfile(info, io.BytesIO(PRINTS.encode()))
    s3.put_object(Bucket=bucket, Key="code/sourcedir.tar.gz", Body=archive.getvalue())
    s3.put_object(Bucket=bucket, Key="data/train/part-0.txt", Body=b"1\n")
    name = _unique("served-redos")
    request = _request(bucket, name)
    request["ResourceConfig"]["InstanceCount"] = 1
    request["AlgorithmSpecification"]["MetricDefinitions"] = DEFINITIONS
    sagemaker.create_training_job(**request)
    done = _wait(sagemaker, name)  # DescribeTrainingJob in a loop: answered while the job's lines are searched
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    # the catastrophic metric was disabled (no value); the line after it was still read
    assert [(m["MetricName"], m["Value"]) for m in done["FinalMetricDataList"]] == [("value", 7.0)]
