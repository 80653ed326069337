"""The Python surface: fit() sets model_data, run_job(wait=False) returns at once, local_gpu
without GPUs fails before anything starts."""
from __future__ import annotations

import json
import time

import pytest

from smdist_launcher.backends.local import run_job
from smdist_launcher.errors import JobFailedError

WRITE_MODEL = 'open(os.path.join(os.environ["SM_MODEL_DIR"], "m.txt"), "w").write(os.environ["SM_CURRENT_HOST"])\n'


def test_fit_sets_model_data(ws, monkeypatch):
    from smdist_launcher import PyTorch

    monkeypatch.setenv("SMDIST_JOBS_DIR", str(ws.jobs))
    ws.plan(WRITE_MODEL, strategy="single", hosts=1)  # writes the script
    est = PyTorch(entry_point="train.py", source_dir=str(ws.src), instance_type="local", instance_count=1,
                  framework_version="2.3", py_version="py311")
    job = est.fit(logs=False)
    assert est.model_data == job.model_data == (job.job_dir / "output" / "model.tar.gz").as_uri()
    assert est.latest_job is job and job.status == "Completed"
    assert job.job_dir.parent == ws.jobs and job.job_name.startswith("pytorch-training-")


def test_wait_false_returns_a_job_to_wait_on(ws):
    go = ws.root / "go"  # the script ends only once the test has seen the job in progress
    plan = ws.plan(f'while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\n' + WRITE_MODEL,
                   strategy="single", hosts=2)
    job = run_job(plan, jobs_root=ws.jobs, wait=False, logs=False)
    try:
        assert job.status == "InProgress"
    finally:
        go.touch()
    assert job.wait() is job and job.status == "Completed"
    assert json.loads((job.job_dir / "job.json").read_text())["status"] == "Completed"


def test_local_gpu_without_gpus_fails_clearly(ws, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    plan = ws.plan(WRITE_MODEL, strategy="single", hosts=2).model_copy(update={"instance_type": "local_gpu"})
    record, error = ws.run(plan, logs=False)
    assert record["status"] == "Failed" and error is not None
    assert "local_gpu needs at least one GPU per simulated host" in error.diagnosis
    assert record["phases"].keys() == {"staging", "done"}  # nothing was started


@pytest.mark.gpu
def test_local_gpu_splits_gpus_between_hosts(ws):
    torch = pytest.importorskip("torch")
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    per_host = torch.cuda.device_count() // 2
    script = ('dist.init_process_group("nccl")\nrank = dist.get_rank()\n'
              'torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))\nt = torch.ones(1, device="cuda")\n'
              'dist.all_reduce(t)\nassert t.item() == dist.get_world_size()\n'
              'print("devices", os.environ["CUDA_VISIBLE_DEVICES"], "sum", t.item(), flush=True)\n'
              'dist.destroy_process_group()\n')
    plan = ws.plan(script, strategy="torch_distributed", pph=per_host).model_copy(update={"instance_type": "local_gpu"})
    record, error = ws.run(plan, logs=False)
    assert error is None, error
    assert record["hosts"]["algo-1"]["gpus"] != record["hosts"]["algo-2"]["gpus"]


def test_stop_ends_a_background_job(ws):
    plan = ws.plan('print("up", flush=True)\ntime.sleep(3600)\n', strategy="single", hosts=2)
    job = run_job(plan, jobs_root=ws.jobs, wait=False, logs=False)
    log = job.job_dir / "logs" / "algo-2.log"
    while not (log.is_file() and "up" in log.read_text()):
        assert job.status == "InProgress", job.diagnosis
        time.sleep(0.1)
    job.stop()
    with pytest.raises(JobFailedError) as info:
        job.wait()
    assert info.value.status == "Stopped" and "stopped by stop()" in info.value.diagnosis
    from smdist_launcher.backends.toolkit.process_sweep import job_processes

    assert job_processes(job.job_id) == []


def test_logs_follow_streams_a_running_job_to_its_end(ws, capsys):
    from smdist_launcher.cli.main import main

    script = 'for i in range(5):\n    print(f"line {i}", flush=True)\n    time.sleep(0.2)\nprint("last line", end="")\n'
    plan = ws.plan(script, strategy="single", hosts=2)
    job = run_job(plan, jobs_root=ws.jobs, wait=False, logs=False)
    assert main(["logs", plan.job_name, "--follow", "--jobs-dir", str(ws.jobs)]) == 0
    out = capsys.readouterr().out
    for prefix in ("[algo-1 r0] ", "[algo-2 r1] "):
        mine = [line[len(prefix):] for line in out.splitlines() if line.startswith(prefix)]
        assert mine == [f"line {i}" for i in range(5)] + ["last line"]
    assert job.wait().status == "Completed"


def test_model_uri_is_staged_as_the_model_channel(ws, monkeypatch):
    """SageMaker gives model_uri to the job as channel `model` (SM_CHANNEL_MODEL); local mode does the same."""
    import tarfile

    from smdist_launcher import PyTorch

    monkeypatch.setenv("SMDIST_JOBS_DIR", str(ws.jobs))
    model = ws.root / "pretrained"
    model.mkdir()
    (model / "weights.txt").write_text("pretrained weights")
    script = ('src = os.path.join(os.environ["SM_CHANNEL_MODEL"], "weights.txt")\n'
              'channels = json.loads(os.environ["SM_CHANNELS"])\n'
              'open(os.path.join(os.environ["SM_MODEL_DIR"], "seen.txt"), "w").write(open(src).read() + " " + '
              '",".join(channels))\n')
    ws.plan(script, strategy="single", hosts=2)  # writes the script
    est = PyTorch(entry_point="train.py", source_dir=str(ws.src), instance_type="local", instance_count=2,
                  framework_version="2.3", py_version="py311", model_uri=model.as_uri())
    job = est.fit(logs=False, job_name="with-model-uri")
    with tarfile.open(job.job_dir / "output" / "model.tar.gz") as tar:
        assert tar.extractfile("seen.txt").read().decode() == "pretrained weights model"
    config = json.loads((job.job_dir / "hosts" / "algo-2" / "opt" / "ml" / "input" / "config" /
                         "inputdataconfig.json").read_text())
    assert config["model"]["ContentType"] == "application/x-sagemaker-model"


CHECKPOINTING = '''
ckpt = os.environ["SMDIST_CHECKPOINT_DIR"]
seen = sorted(os.listdir(ckpt))
open(os.path.join(os.environ["SM_MODEL_DIR"], "seen.json"), "w").write(json.dumps(seen))
open(os.path.join(ckpt, f"step-{len(seen) + 1}.pt"), "w").write("weights")
sys.exit(3 if os.environ.get("SM_HP_FAIL") == "1" else 0)
'''


def test_checkpoints_in_a_local_folder_survive_jobs_and_failures(ws, monkeypatch):
    """checkpoint_s3_uri as a folder (a path, or file://): restored into /opt/ml/checkpoints at the start, saved back at
    the end, a failed job's too; a job without max_run gets SageMaker's default (86,400 s)."""
    import tarfile

    from smdist_launcher import PyTorch

    monkeypatch.setenv("SMDIST_JOBS_DIR", str(ws.jobs))
    store = ws.root / "checkpoints"
    ws.plan(CHECKPOINTING, strategy="single", hosts=1)  # writes the script
    common = dict(entry_point="train.py", source_dir=str(ws.src), instance_type="local", instance_count=1,
                  framework_version="2.3", py_version="py311")
    first = PyTorch(**common, checkpoint_s3_uri=str(store)).fit(logs=False, job_name="ckpt-first")
    assert first.status == "Completed" and first.plan.max_run is None
    assert first._supervisor.max_run == 86400  # the default reached the supervisor, which enforces it
    assert sorted(p.name for p in store.iterdir()) == ["step-1.pt"]

    second = PyTorch(**common, checkpoint_s3_uri=store.as_uri(), max_run=600, hyperparameters={"fail": 1}).fit(
        logs=False, job_name="ckpt-second", wait=False)
    with pytest.raises(JobFailedError):
        second.wait()
    assert second._supervisor.max_run == 600
    with tarfile.open(second.job_dir / "output" / "model.tar.gz") as tar:
        assert json.load(tar.extractfile("seen.json")) == ["step-1.pt"]  # the first job's checkpoint, restored
    assert sorted(p.name for p in store.iterdir()) == ["step-1.pt", "step-2.pt"]  # saved although the job failed
