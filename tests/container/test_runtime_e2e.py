"""Real runs: 2 simulated hosts x 2 processes, each host its own /opt/ml root and loopback address."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from .hostjobs import free_port, job_processes, make_plan, mpirun_available, sigterm_runtimes_and_check, wait_for_files

pytestmark = pytest.mark.slow
needs_mpi = pytest.mark.skipif(not mpirun_available(), reason="needs OpenMPI's mpirun")

RANK_ENV = """
import json, os, sys
rank = int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "-1")))
world = int(os.environ.get("WORLD_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "-1")))
os.environ.setdefault("RANK", str(rank)); os.environ.setdefault("WORLD_SIZE", str(world))
"""

ALLREDUCE = RANK_ENV + """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
out = {"rank": rank, "world": world, "host": os.environ["SM_CURRENT_HOST"], "sum": t.item(),
       "hosts": os.environ["SM_HOSTS"], "hps": os.environ["SM_HPS"], "cwd": os.getcwd(),
       "master_addr": os.environ.get("MASTER_ADDR"), "secret": os.environ.get("MY_API_TOKEN"),
       "argv": sys.argv[1:]}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"rank{rank}.json"), "w") as f:
    json.dump(out, f)
print("done", rank)
dist.destroy_process_group()
"""

FAIL_RANK3 = RANK_ENV + """
import time, signal, torch, torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
if rank == 3:
    if os.environ.get("HOW") == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise ValueError("rank three is broken")
dist.all_reduce(torch.ones(1))
time.sleep(60)
"""

SLEEP = RANK_ENV + """
import time
open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"ready{rank}"), "w").close()
time.sleep(300)
"""


def _check_allreduce(job, outputs, hps):
    for host, (code, text) in outputs.items():
        assert code == 0, text
        assert (job.roots[host] / "output" / "success").exists()
    results = {}
    for i, host in enumerate(job.names):
        for rank in (2 * i, 2 * i + 1):
            r = json.loads((job.roots[host] / "output" / "data" / f"rank{rank}.json").read_text())
            results[rank] = r
            assert (r["rank"], r["world"], r["host"], r["sum"]) == (rank, 4, host, 10.0)
            assert r["hosts"] == '["algo-1","algo-2"]' and json.loads(r["hps"]) == hps
            assert r["cwd"] == str(job.roots[host] / "code")
            assert r["secret"] == "s3cret"  # from the runtime's env, never from the redacted plan file
            assert f"[{host} r{rank}] done {rank}" in "".join(t for _, t in outputs.values())
    assert len(results) == 4
    assert "s3cret" not in (job.roots["algo-1"] / "input" / "config" / "launchplan.json").read_text()


def test_torchrun_two_hosts_all_reduce(make_job):
    hps = {"epochs": 1, "name": "$(rm -rf /)"}
    job = make_job(make_plan("torchrun", hps=hps, env={"MY_API_TOKEN": "s3cret"}), ALLREDUCE)
    job.start({"MY_API_TOKEN": "s3cret"})
    outputs = job.wait()
    _check_allreduce(job, outputs, hps)
    r = json.loads((job.roots["algo-2"] / "output" / "data" / "rank3.json").read_text())
    assert r["master_addr"] == job.host_map["algo-1"]


@needs_mpi
def test_mpirun_two_hosts_all_reduce(make_job):
    hps = {"epochs": 1}
    job = make_job(make_plan("mpirun", hps=hps, env={"MY_API_TOKEN": "s3cret"}), ALLREDUCE)
    job.start({"MY_API_TOKEN": "s3cret"})
    _check_allreduce(job, job.wait(), hps)


def test_torchrun_failing_rank_is_named(make_job):
    job = make_job(make_plan("torchrun"), FAIL_RANK3)
    job.start()
    outputs = job.wait()
    assert outputs["algo-2"][0] == 1
    f = job.failure("algo-2")
    assert (f["host"], f["rank"], f["exit_code"], f["likely_victim"]) == ("algo-2", 3, 1, False)
    assert f["traceback"][-1].endswith("ValueError: rank three is broken")
    assert "rank 3 failed first" in (job.roots["algo-2"] / "output" / "failure").read_text()
    # algo-1's ranks lost their peer: whatever it reports must not look like the cause
    if outputs["algo-1"][0] != 0:
        v = job.failure("algo-1")
        assert v["likely_victim"] or v["time"] > f["time"]


def test_torchrun_sigkilled_rank(make_job):
    job = make_job(make_plan("torchrun"), FAIL_RANK3)
    job.start({"HOW": "kill"})
    job.wait()
    f = job.failure("algo-2")
    assert (f["rank"], f["signal"]) == (3, "SIGKILL")


@needs_mpi
def test_mpirun_failing_rank_is_named_and_worker_fails_too(make_job):
    job = make_job(make_plan("mpirun"), FAIL_RANK3)
    job.start()
    outputs = job.wait()
    assert outputs["algo-1"][0] == 1 and outputs["algo-2"][0] == 1
    f = job.failure("algo-1")
    assert (f["host"], f["rank"], f["reported_by"], f["likely_victim"]) == ("algo-2", 3, "algo-1", False)
    assert f["traceback"][-1].endswith("ValueError: rank three is broken")
    assert job.failure("algo-2")["likely_victim"] is True


def _wait_ready(job, n, timeout=180):
    files = [job.roots[h] / "output" / "data" / f"ready{r}"
             for i, h in enumerate(job.names) for r in (2 * i, 2 * i + 1)]
    wait_for_files(job, files[:n], timeout)


@pytest.mark.parametrize("kind", ["torchrun", pytest.param("mpirun", marks=needs_mpi)])
def test_sigterm_leaves_no_process_behind(make_job, kind):
    job = make_job(make_plan(kind), SLEEP)
    job.start()
    _wait_ready(job, 4)
    sigterm_runtimes_and_check(job, 6)


def test_single_process_python_and_missing_script(make_job):
    plan = make_plan("python", hosts=1, ppn=1, hps={"lr": 0.5})
    job = make_job(plan, "import os, sys\nprint('args', sys.argv[1:], os.environ['SM_HP_LR'])\n")
    job.start()
    (code, text), = job.wait().values()
    assert code == 0 and "[algo-1 r0] args [] 0.5" in text
    job2 = make_job(make_plan("python", hosts=1, ppn=1, entry="missing.py"), "")
    (job2.roots["algo-1"] / "code" / "missing.py").unlink()
    (job2.roots["algo-1"] / "code" / "other.py").write_text("")
    job2.start()
    (code, text), = job2.wait().values()
    assert code == 1
    f = job2.failure("algo-1")
    assert f["rank"] == 0 and f["exit_code"] == 2 and "missing.py" in "\n".join(f["traceback"])


@needs_mpi
def test_mpi_worker_gives_up_when_master_never_comes(make_job):
    job = make_job(make_plan("mpirun"), ALLREDUCE)
    job.procs = {}
    job.names = ["algo-2"]  # start only the worker
    job.start({"SMDIST_WORKER_WAIT_S": "1"})
    (code, text), = job.wait().values()
    assert code == 1
    assert "did not start ranks here within 1 s" in "\n".join(job.failure("algo-2")["traceback"])


@needs_mpi
def test_master_killed_hard_worker_exits_and_nothing_survives(make_job):
    job = make_job(make_plan("mpirun"), SLEEP)
    job.start()
    _wait_ready(job, 4)
    os.killpg(job.procs["algo-1"].pid, signal.SIGKILL)
    code, text = job.procs["algo-2"].communicate(timeout=240)
    assert job.procs["algo-2"].returncode == 1, code
    job.procs["algo-1"].wait()
    deadline = time.monotonic() + 120  # orphaned orted notices its lost mpirun on its own: wait for that, bounded
    while job_processes(job.job_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert job_processes(job.job_id) == []


@pytest.mark.parametrize("strategy", ["torch_distributed", pytest.param("mpi", marks=needs_mpi)])
def test_plans_from_the_planner_run(make_job, strategy):
    """The planner's real argv (toolkit flags, script args, `-x` lists) runs as is on the simulated hosts."""
    resolved = pytest.importorskip("smdist_launcher.jobspec.resolved")
    planner = pytest.importorskip("smdist_launcher.plan.planner")
    local = resolved.InstanceInfo(instance_type="local", local=True)
    job_spec = resolved.ResolvedJob(
        framework="pytorch", framework_version="2.3", py_version="py311", job_name="job", entry_point="train.py",
        source_dir="src", instance_type="local", instance_count=2, instance=local, processes_per_host=2,
        strategy=strategy, hyperparameters={"epochs": 2}, network_interface="lo", master_port=free_port(),
        environment={"MY_API_TOKEN": "s3cret"})
    plan = planner.build_plan(job_spec).to_dict()  # redacted, as the backend hands it over
    job = make_job(plan, ALLREDUCE)
    job.start({"MY_API_TOKEN": "s3cret"})
    outputs = job.wait()
    for code, text in outputs.values():
        assert code == 0, text
    for rank, host in enumerate(["algo-1", "algo-1", "algo-2", "algo-2"]):
        r = json.loads((job.roots[host] / "output" / "data" / f"rank{rank}.json").read_text())
        assert (r["rank"], r["host"], r["sum"], r["argv"]) == (rank, host, 10.0, ["--epochs", "2"])
        assert r["secret"] == "s3cret"


HANG_IN_NAMED_FUNCTION = RANK_ENV + """
import time
def stuck_in_named_function():
    open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"ready{rank}"), "w").close()
    time.sleep(300)
stuck_in_named_function()
"""


def test_a_stopped_runtime_reports_where_its_ranks_were_stuck(make_job):
    """SageMaker stops a job (StopTrainingJob, max_run) with SIGTERM to the container's runtime: before stopping its
    ranks, it names them and where each was, in its log and failure.json."""
    job = make_job(make_plan("torchrun", hosts=1), HANG_IN_NAMED_FUNCTION)
    job.start()
    _wait_ready(job, 2)
    os.kill(job.procs["algo-1"].pid, signal.SIGTERM)
    [(code, text)] = job.wait(timeout=120).values()
    assert code == 1
    running = job.failure("algo-1")["still_running"]
    assert sorted(r["rank"] for r in running) == [0, 1]
    assert all(r["where"].startswith("in stuck_in_named_function (train.py:") for r in running), running
    assert "[algo-1 r1] still running when stopped" in text and "stuck_in_named_function" in text


STEPS_THEN_STUCK = RANK_ENV + """
import time
print("step 0", flush=True)
def stuck_in_named_function():
    time.sleep(300)
stuck_in_named_function()
"""


def test_a_host_runtime_detects_a_hang_itself(make_job):
    """Engines whose launcher cannot watch the ranks (Slurm, SageMaker with our image) hand the runtime the log
    monitors: it finds the silence, names the quietest ranks with their stacks, and fails the host as a hang."""
    from smdist_launcher.container.hang_detector import Monitor
    from smdist_launcher.container.host_resilience import RESILIENCE_ENV, HostResilience

    job = make_job(make_plan("torchrun", hosts=1), STEPS_THEN_STUCK)
    # the grace covers the ranks' start (the clock would else run from the host's), not the silence after step 0
    settings = HostResilience(monitors=[Monitor("step", r"step (\d+)", expected_every_s=3, start_after_s=60)])
    job.start({RESILIENCE_ENV: settings.encode()})
    [(code, text)] = job.wait(timeout=180).values()
    assert code == 1
    failure = job.failure("algo-1")
    assert failure["cause"] == "hang" and failure["traceback"][0].startswith("hang: no line matched log monitor 'step'")
    assert sorted(r["rank"] for r in failure["still_running"]) == [0, 1], text
    assert "stuck_in_named_function" in "\n".join(failure["traceback"])
    assert "dumping every rank's stack" in text


def test_a_rank_silent_from_its_start_hangs_too(make_job):
    """Stuck before its first line (rendezvous, NCCL init): the monitor's clock runs from the host's start, not from a
    first rank line that never comes (max_run was the only way out)."""
    from smdist_launcher.container.hang_detector import Monitor
    from smdist_launcher.container.host_resilience import RESILIENCE_ENV, HostResilience

    job = make_job(make_plan("python", hosts=1, ppn=1), "import time\ntime.sleep(300)\n")
    settings = HostResilience(monitors=[Monitor("step", r"step (\d+)", expected_every_s=2, start_after_s=1)])
    job.start({RESILIENCE_ENV: settings.encode()})
    [(code, text)] = job.wait(timeout=120).values()
    assert code == 1, text
    failure = job.failure("algo-1")
    assert failure["cause"] == "hang" and failure["traceback"][0].startswith("hang: no line matched log monitor 'step'")


FAILS_ONCE = """
import os, sys
marker = os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "failed-once")
if not os.path.exists(marker):
    open(marker, "w").close()
    sys.exit("the first run fails")
print("second run ok")
"""


def test_process_restarts_start_a_failed_rank_again_in_place(make_job):
    from smdist_launcher.container.host_resilience import RESILIENCE_ENV, HostResilience

    job = make_job(make_plan("python", hosts=1, ppn=1), FAILS_ONCE)
    job.start({RESILIENCE_ENV: HostResilience(process_restarts=1).encode()})
    [(code, text)] = job.wait().values()
    assert code == 0, text
    assert "restarting them in place (process restart 1 of 1)" in text and "second run ok" in text
    assert (job.roots["algo-1"] / "output" / "success").exists()
