from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from smdist_launcher.cli.main import main


def test_prints_yaml_by_default_and_json_on_request(job_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(job_file)]) == 0
    as_yaml = yaml.safe_load(capsys.readouterr().out)
    assert main(["plan", str(job_file), "--format", "json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert as_yaml == as_json
    assert as_json["launcher"] == "torchrun" and as_json["network_interface"] == "lo"


def test_single_host(job_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(job_file), "--host", "algo-2", "--format", "json"]) == 0
    host = json.loads(capsys.readouterr().out)
    assert host["name"] == "algo-2" and host["argv"][host["argv"].index("--node_rank") + 1] == "1"
    assert main(["plan", str(job_file), "--host", "algo-9"]) == 2
    assert capsys.readouterr().err == f"{job_file}: --host: no host 'algo-9' in this plan; hosts: algo-1, algo-2\n"


def test_write_then_check(job_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pinned = tmp_path / "plans" / "job.json"
    assert main(["plan", str(job_file), "--check", str(pinned)]) == 1
    assert "no pinned plan yet" in capsys.readouterr().out
    assert main(["plan", str(job_file), "--write", str(pinned)]) == 0
    assert json.loads(pinned.read_text())["job_name"] == "cli-test"
    assert main(["plan", str(job_file), "--check", str(pinned)]) == 0

    job_file.write_text(job_file.read_text().replace("epochs: 2", "epochs: 3"))
    capsys.readouterr()
    assert main(["plan", str(job_file), "--check", str(pinned)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"{pinned}: the plan changed")
    assert '\n-        "2"\n' in out and '\n+        "3"\n' in out


def test_yaml_pin_follows_extension(job_file: Path, tmp_path: Path) -> None:
    pinned = tmp_path / "job.yml"
    assert main(["plan", str(job_file), "--write", str(pinned)]) == 0
    assert yaml.safe_load(pinned.read_text())["strategy"] == "torch_distributed"
    assert main(["plan", str(job_file), "--check", str(pinned)]) == 0


def test_host_with_pin_is_a_usage_error(job_file: Path, tmp_path: Path) -> None:
    assert main(["plan", str(job_file), "--host", "algo-1", "--check", str(tmp_path / "p.json")]) == 2


def test_invalid_job_exits_2(job_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job_file.write_text(job_file.read_text().replace("framework: pytorch", "framework: pytorh"))
    assert main(["plan", str(job_file)]) == 2
    assert capsys.readouterr().err.startswith(f"{job_file}: framework: must be one of")


def test_secrets_never_printed(job_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job_file.write_text(job_file.read_text() + "environment:\n  HF_TOKEN: hf-s3cr3t\n  PLAIN: visible\n")
    for extra in ([], ["--format", "json"]):
        assert main(["plan", str(job_file), *extra]) == 0
        out = capsys.readouterr().out
        assert "hf-s3cr3t" not in out and "***REDACTED***" in out
    pinned = tmp_path / "p.json"
    assert main(["plan", str(job_file), "--write", str(pinned)]) == 0
    assert "hf-s3cr3t" not in pinned.read_text() and "visible" in pinned.read_text()


def test_request_is_what_sagemaker_would_receive(sagemaker_job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(sagemaker_job), "--request", "--region", "eu-west-1", "--format", "json"]) == 0
    out = capsys.readouterr().out
    request = json.loads(out)
    assert request["TrainingJobName"] == "req-test"
    assert request["RoleArn"] == "arn:aws:iam::111122223333:role/Train"
    assert request["AlgorithmSpecification"]["TrainingImage"] == (
        "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-training:2.3-gpu-py311")
    assert request["ResourceConfig"] == {"VolumeSizeInGB": 30, "InstanceCount": 2, "InstanceType": "ml.p4d.24xlarge"}
    assert request["HyperParameters"]["sagemaker_region"] == '"eu-west-1"'
    assert request["HyperParameters"]["sagemaker_submit_directory"] == (
        '"s3://sagemaker-eu-west-1-<account>/req-test/source/sourcedir.tar.gz"')
    assert request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] == "s3://bucket/train"
    assert request["Environment"]["HF_TOKEN"] != "hf_secret_value" and "hf_secret_value" not in out
    assert request["Environment"]["MODE"] == "fast"
    # without --region: a placeholder, and YAML by default
    assert main(["plan", str(sagemaker_job), "--request"]) == 0
    as_yaml = yaml.safe_load(capsys.readouterr().out)
    assert as_yaml["HyperParameters"]["sagemaker_region"] == '"<region>"'


def test_request_makes_no_aws_call_and_imports_no_boto3(sagemaker_job: Path) -> None:
    import subprocess
    import sys

    code = ("import sys; from smdist_launcher.cli.main import main; rc = main(['plan', sys.argv[1], '--request']); "
            "print(rc, sorted(m for m in ('boto3', 'botocore') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(sagemaker_job)], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0 []"


def test_request_refuses_what_sagemaker_cannot_run(job_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(job_file), "--request"]) == 2
    assert capsys.readouterr().err == (f"{job_file}: instance_type: local instance types run on this machine "
                                       "(backends.local), not on SageMaker\n")


@pytest.mark.parametrize(("extra", "message"), [
    (["--region", "us-west-2"], "--region: is only used with --request"),
    (["--request", "--region", "moon"], "--region: must be an AWS region such as 'us-west-2', got 'moon'"),
    (["--request", "--host", "algo-1"], "--request: cannot be combined with --host, --check or --write"),
])
def test_request_usage_errors(sagemaker_job: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
                              message: str) -> None:
    assert main(["plan", str(sagemaker_job), *extra]) == 2
    assert capsys.readouterr().err.startswith(f"{sagemaker_job}: {message}")


def test_a_create_training_job_request_shows_what_serve_would_run(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """SDK v3's requests (ContainerEntrypoint, no sagemaker_submit_directory) plan as container-command jobs: every
    host runs the command, hyperparameters exactly as sent."""
    request = {"TrainingJobName": "v3-job", "AlgorithmSpecification": {
        "TrainingImage": "img", "TrainingInputMode": "File", "ContainerEntrypoint": ["/bin/bash"],
        "ContainerArguments": ["-c", "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh && "
                                     "/opt/ml/input/data/sm_drivers/sm_train.sh"]},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
        "HyperParameters": {"epochs": "2", "optimizer": "sgd"}}
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    assert main(["plan", str(path), "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["launcher"] == "container_command" and [h["name"] for h in plan["hosts"]] == ["algo-1", "algo-2"]
    assert all(h["argv"][:2] == ["/bin/bash", "-c"] for h in plan["hosts"])
    assert main(["plan", str(path), "--dryrun"]) == 2  # a request is what would be sent already
