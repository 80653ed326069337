"""Emulated pods (emulated_pods.py) behind the API emulator: the mnist example through `fit(backend="kubernetes")`
as a TrainJob and as a HyperPodPyTorchJob, each pod a local process running the rendered command and environment;
and a TrainJob with a secret hyperparameter and environment variable whose script fails on algo-2, named by
`describe`, the secrets reaching the script from the job's Secret and nowhere else. All through the real
`kubernetes` client, the backend's own submit / describe / logs, and moto S3 (the pods fetch code and channels
there)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from smdist_launcher.backends import registry
from smdist_launcher.backends.states import JobState
from smdist_launcher.errors import JobFailedError
from smdist_launcher.estimators.base import estimator_from_job_file

from .emulated_pods import Operators

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "mnist"


@pytest.fixture
def operators(k8s_emulator, cluster, s3, tmp_path):
    env = {k: v for k, v in __import__("os").environ.items()
           if k.startswith(("AWS_", "SMDIST_S3_"))}  # the cluster's S3 access (IRSA's stand-in): moto
    ops = Operators(cluster, k8s_emulator.logs_dir, tmp_path / "pods", env).start()
    yield ops
    ops.close()
    assert ops.errors == []


@pytest.mark.parametrize("flavour", ["trainjob", "jobset", "hyperpod", "job"])
def test_mnist_trains(flavour, operators, k8s_emulator, s3, tiny_mnist, tmp_path, capsys) -> None:
    name = f"k8s-mnist-{flavour}"
    est = estimator_from_job_file(str(EXAMPLE / "job_torch_distributed.yaml"),
                                  overrides={"output_path": f"s3://{s3.bucket}/out"})
    job = est.fit({"training": f"file://{tiny_mnist}/train", "test": f"file://{tiny_mnist}/test"},
                  job_name=name, backend="kubernetes", jobs_root=str(tmp_path / "jobs"),
                  kubernetes={"flavour": flavour, "kubeconfig": str(k8s_emulator.kubeconfig)})
    shown = capsys.readouterr().out
    status = registry.get("kubernetes").describe(job.handle)
    assert status.state is JobState.COMPLETED, status
    assert [h.name for h in status.hosts] == ["algo-1", "algo-2"]
    assert status.model_data == f"s3://{s3.bucket}/out/{name}/output/model.tar.gz"
    assert "test accuracy" in shown
    # `smdist status` / `smdist logs` find it in the jobs folder: both hosts' logs, the ranks' own prefixes kept
    from smdist_launcher.cli.main import main

    assert main(["status", name, "--jobs-dir", str(tmp_path / "jobs")]) == 0
    assert "Completed" in capsys.readouterr().out
    assert main(["logs", name, "--jobs-dir", str(tmp_path / "jobs")]) == 0
    text = capsys.readouterr().out
    assert "[algo-1 r0] training on 256 images, world size 4" in text
    assert "[algo-2] success" in text and "[algo-2] [algo-2]" not in text  # algo-2's runtime, prefixed once
    s3.head_object(Bucket=s3.bucket, Key=f"out/{name}/output/model.tar.gz")  # delivered by the pods


SECRET_HP, SECRET_ENV = "hp-value-5f3a9c", "env-value-8b1d7e"


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]


FAILING = '''
import hashlib, os, sys
import torch.distributed as dist
def digest(v): return hashlib.sha256(v.encode()).hexdigest()[:16]
token = sys.argv[sys.argv.index("--api_token") + 1]
print(f"secrets {digest(token)} {digest(os.environ['HF_TOKEN'])}", flush=True)  # digests: the values stay unprinted
dist.init_process_group("gloo")
print(f"rank {dist.get_rank()} up", flush=True)
dist.barrier()
if os.environ["SM_CURRENT_HOST"] == "algo-2":
    sys.exit(3)
'''


def test_a_failing_job_names_its_pod_and_gets_its_secrets(operators, k8s_emulator, cluster, s3, tiny_mnist,
                                                           tmp_path) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(FAILING)
    est = estimator_from_job_file(str(EXAMPLE / "job_torch_distributed.yaml"), overrides={
        "output_path": f"s3://{s3.bucket}/out", "source_dir": str(code), "hyperparameters": {"api_token": SECRET_HP},
        "environment": {"HF_TOKEN": SECRET_ENV}})
    options = {"flavour": "trainjob", "kubeconfig": str(k8s_emulator.kubeconfig)}
    # the job file's own channels name the demo's data set: a fresh clone has none until demo.sh ran
    inputs = {"training": f"file://{tiny_mnist}/train", "test": f"file://{tiny_mnist}/test"}
    backend = registry.get("kubernetes")
    rendered = backend.dryrun(est.submission(est.plan(inputs, job_name="k8s-fails")), options).content
    assert "secretKeyRef" in rendered and "k8s-fails-secrets" in rendered
    with pytest.raises(JobFailedError) as caught:
        est.fit(inputs, job_name="k8s-fails", backend="kubernetes", jobs_root=str(tmp_path / "jobs"), logs=False,
                kubernetes=options)
    # the host's runtime ends with 1 when a rank failed (its ranks' codes are in its log)
    assert "pod k8s-fails-node-0-1 (algo-2) failed: exit code 1" in str(caught.value)
    # the real values reached the script on both hosts (from the Secret), and are in nothing we wrote or showed
    pod_logs = [p.read_text() for p in (k8s_emulator.logs_dir / "default").glob("k8s-fails-*.log")]
    assert len(pod_logs) == 2
    assert all(f"secrets {_digest(SECRET_HP)} {_digest(SECRET_ENV)}" in log for log in pod_logs), pod_logs
    sent = json.dumps(cluster.get("TrainJob", "k8s-fails", "default"))
    written = [p.read_bytes() for p in (tmp_path / "jobs").rglob("*") if p.is_file()]
    assert written
    for value in (SECRET_HP, SECRET_ENV):
        for where, text in [("the dry run", rendered), ("the TrainJob", sent), ("the error", str(caught.value)),
                            *(("a pod log", log) for log in pod_logs)]:
            assert value not in text, where
        assert not any(value.encode() in data for data in written), "the job folder"
