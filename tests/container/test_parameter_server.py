"""`ps` hosts (distribution parameter_server): a parameter server next to each worker, as the TF toolkit runs it.

TensorFlow is not a dependency of this project: a tiny fake `tensorflow` package (only `distribute.Server` whose
`join()` writes a marker with what it was given, then sleeps) stands in for it on PYTHONPATH."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from smdist_launcher.container.parameter_server import EXIT_NO_TENSORFLOW, ps_task
from smdist_launcher.container.process_tree import is_alive
from smdist_launcher.plan.tf_config import ps_cluster_json, ps_server_tf_config, ps_worker_tf_config

from .hostjobs import job_processes, make_plan, sigterm_runtimes_and_check, wait_for_files

FAKE_TENSORFLOW = '''
import json, os, time, types


class Server:
    def __init__(self, server_or_cluster_def, job_name=None, task_index=None, protocol=None, config=None, start=True):
        self.record = {"cluster": server_or_cluster_def, "job_name": job_name, "task_index": task_index,
                       "protocol": protocol}

    def join(self):
        record = dict(self.record, pid=os.getpid(), tf_config=os.environ.get("TF_CONFIG"),
                      cuda=os.environ.get("CUDA_VISIBLE_DEVICES"))
        path = os.path.join(os.environ["FAKE_TF_MARKERS"], f"ps{self.task_index()}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(record, f)
        os.replace(path + ".tmp", path)
        while True:
            time.sleep(60)

    def task_index(self):
        return self.record["task_index"]


distribute = types.SimpleNamespace(Server=Server)
'''

# The worker waits for its own parameter server's marker (so both run at once), then reports what it saw.
WORKER = '''
import json, os, sys, time
index = json.loads(os.environ["SMDIST_PS_TF_CONFIG"])["task"]["index"]
marker = os.path.join(os.environ["FAKE_TF_MARKERS"], f"ps{index}.json")
deadline = time.monotonic() + 180  # its parameter server starts beside it: a busy machine
while not os.path.exists(marker):
    if time.monotonic() > deadline:
        sys.exit("no parameter server marker")
    time.sleep(0.05)
ps = json.load(open(marker))
os.kill(ps["pid"], 0)  # still running next to us
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "worker.json"), "w") as f:
    json.dump({"tf_config": os.environ["TF_CONFIG"], "ps_pid": ps["pid"]}, f)
if os.environ.get("WORKER_SLEEPS"):
    time.sleep(300)
print("worker done", index)
'''


def ps_plan(hosts: int = 2) -> dict:
    """What plan/planner.py's parameter_server layout gives every host (role ps, the two TF_CONFIGs)."""
    plan = make_plan("python", hosts=hosts, ppn=1)
    names = [h["name"] for h in plan["hosts"]]
    cluster = ps_cluster_json(names)
    plan["launcher"] = plan["strategy"] = "parameter_server"
    for i, h in enumerate(plan["hosts"]):
        h["role"] = "ps"
        h["env"] = {"TF_CONFIG": ps_worker_tf_config(cluster, i),
                    "SMDIST_PS_TF_CONFIG": ps_server_tf_config(cluster, i)}
    return plan


def fake_tensorflow(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "fake_tf" / "tensorflow").mkdir(parents=True)
    (tmp_path / "fake_tf" / "tensorflow" / "__init__.py").write_text(FAKE_TENSORFLOW)
    (tmp_path / "markers").mkdir()
    return {"PYTHONPATH": str(tmp_path / "fake_tf"), "FAKE_TF_MARKERS": str(tmp_path / "markers")}


def _addresses(job, port):
    return [f"{job.host_map[n]}:{port}" for n in job.names]


@pytest.mark.slow
def test_ps_hosts_start_one_parameter_server_each_with_mapped_addresses(make_job, tmp_path):
    job = make_job(ps_plan(), WORKER)
    env = fake_tensorflow(tmp_path)
    job.start(env)
    outputs = job.wait(timeout=180)
    cluster = {"master": _addresses(job, 2222)[:1], "ps": _addresses(job, 2223), "worker": _addresses(job, 2222)[1:]}
    for i, host in enumerate(job.names):
        code, text = outputs[host]
        assert code == 0, text
        assert (job.roots[host] / "output" / "success").exists()
        ps = json.loads((tmp_path / "markers" / f"ps{i}.json").read_text())
        assert (ps["cluster"], ps["job_name"], ps["task_index"], ps["protocol"]) == (cluster, "ps", i, "grpc")
        assert json.loads(ps["tf_config"]) == {"cluster": cluster, "environment": "cloud",
                                               "task": {"index": i, "type": "ps"}}
        assert ps["cuda"] == ""  # the toolkit keeps its parameter servers off the GPUs
        worker = json.loads((job.roots[host] / "output" / "data" / "worker.json").read_text())
        assert worker["ps_pid"] == ps["pid"] and not is_alive(ps["pid"])
        assert json.loads(worker["tf_config"])["task"] == ({"index": 0, "type": "master"} if i == 0 else
                                                           {"index": i - 1, "type": "worker"})
        assert json.loads(worker["tf_config"])["cluster"] == cluster
        assert f"[{host}] ps: starting TensorFlow parameter server ps/{i}" in text
        assert f"[{host} r{i}] worker done {i}" in text
    assert job_processes(job.job_id) == []


@pytest.mark.slow
def test_sigterm_stops_worker_and_parameter_server(make_job, tmp_path):
    job = make_job(ps_plan(), WORKER)
    job.start({**fake_tensorflow(tmp_path), "WORKER_SLEEPS": "1"})
    wait_for_files(job, [job.roots[h] / "output" / "data" / "worker.json" for h in job.names])
    sigterm_runtimes_and_check(job, 6)  # 2 x (runtime, parameter server, worker)


@pytest.mark.slow
def test_missing_tensorflow_fails_the_host_clearly(make_job, tmp_path):
    job = make_job(ps_plan(), WORKER)
    job.start({"FAKE_TF_MARKERS": str(tmp_path), "WORKER_SLEEPS": "1"})  # no fake tensorflow: the worker waits
    outputs = job.wait(timeout=180)
    for host in job.names:
        code, text = outputs[host]
        assert code == 1, text
        f = job.failure(host)
        assert (f["host"], f["rank"], f["exit_code"], f["likely_victim"]) == (host, None, EXIT_NO_TENSORFLOW, False)
        tb = "\n".join(f["traceback"])
        assert "TensorFlow is not importable" in tb and "No module named 'tensorflow'" in tb
        assert f["traceback"][-1].startswith(f"the parameter server of {host}")
        assert f["command"][-1] == "smdist_launcher.container.parameter_server"
        assert "TensorFlow is not importable" in (job.roots[host] / "output" / "failure").read_text()
        assert not (job.roots[host] / "output" / "success").exists()
    assert job_processes(job.job_id) == []


def test_parameter_server_module_without_tensorflow(tmp_path):
    env = {**os.environ, "TF_CONFIG": ps_server_tf_config(ps_cluster_json(["algo-1", "algo-2"]), 1)}
    env.pop("PYTHONPATH", None)
    r = subprocess.run([sys.executable, "-m", "smdist_launcher.container.parameter_server"], env=env,
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == EXIT_NO_TENSORFLOW
    assert "TensorFlow is not importable" in r.stderr and "requirements.txt" in r.stderr


@pytest.mark.parametrize("text,message", [
    (None, "$TF_CONFIG is empty"),
    ("{not json", "not valid JSON"),
    ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "ps", "index": 0}}', "'ps' address list"),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "worker", "index": 0}}', "must be {'type': 'ps'"),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 1}}', "outside cluster.ps"),
])
def test_ps_task_rejects_bad_tf_config(text, message):
    with pytest.raises(ValueError, match=None) as e:
        ps_task(text)
    assert message in str(e.value)


def test_ps_task():
    cluster, index = ps_task(ps_server_tf_config(ps_cluster_json(["algo-1", "algo-2"]), 1))
    assert index == 1 and cluster["ps"] == ["algo-1:2223", "algo-2:2223"]


@pytest.mark.slow
def test_plan_from_the_planner_runs(make_job, tmp_path):
    """The planner's real parameter_server plan (role ps, both TF_CONFIGs) runs as is on the simulated hosts."""
    resolved = pytest.importorskip("smdist_launcher.jobspec.resolved")
    planner = pytest.importorskip("smdist_launcher.plan.planner")
    job_spec = resolved.ResolvedJob(
        framework="tensorflow", framework_version="2.14", py_version="py310", job_name="job", entry_point="train.py",
        source_dir="src", instance_type="local", instance_count=2,
        instance=resolved.InstanceInfo(instance_type="local", local=True), processes_per_host=1,
        strategy="parameter_server", hyperparameters={"epochs": 2}, network_interface="lo")
    job = make_job(planner.build_plan(job_spec).to_dict(), WORKER)
    job.start(fake_tensorflow(tmp_path))
    for code, text in job.wait(timeout=180).values():
        assert code == 0, text
    ps = [json.loads((tmp_path / "markers" / f"ps{i}.json").read_text()) for i in range(2)]
    assert [p["cluster"]["ps"] for p in ps] == [_addresses(job, 2223)] * 2
    assert job_processes(job.job_id) == []
