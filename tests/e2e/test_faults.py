"""Jobs that go wrong end as specified: the whole job stops, the diagnosis names the first
failing host/rank (not a victim), no process survives, nothing outside the job folder changes."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest

from .conftest import PRELUDE

CLI = "import sys; from smdist_launcher.cli.main import main; sys.exit(main(sys.argv[1:]))"

# Every rank is up before the fault, so the others are stuck in a collective (victims).
ALL_UP_THEN = r'''
dist.init_process_group("gloo")
rank = dist.get_rank()
dist.barrier()
print(f"ready {rank}", flush=True)
{fault}
dist.all_reduce(torch.ones(1))
dist.barrier()
'''


def test_rank_that_raises_fails_the_job_and_names_it(ws):
    fault = 'if rank == 3:\n    raise ValueError("boom from rank 3")'
    plan = ws.plan(ALL_UP_THEN.replace("{fault}", fault), strategy="torch_distributed")
    record, error = ws.run(plan)
    assert record["status"] == "Failed" and error is not None and error.status == "Failed"
    assert "host algo-2, rank 3" in error.diagnosis
    assert "ValueError: boom from rank 3" in error.diagnosis
    assert record["failure_reason"].startswith("host algo-2, rank 3 failed first")
    assert error.job_dir == str(ws.jobs / plan.job_name)
    assert "boom from rank 3" in (ws.jobs / plan.job_name / "logs" / "algo-2.log").read_text()


@pytest.mark.mpi
def test_rank_killed_by_sigkill_under_mpirun(ws):
    fault = 'if rank == 2:\n    os.kill(os.getpid(), 9)'
    plan = ws.plan(ALL_UP_THEN.replace("{fault}", fault), strategy="mpi")
    record, error = ws.run(plan)
    assert record["status"] == "Failed" and error is not None
    assert "algo-2, rank 2" in error.diagnosis
    assert "SIGKILL" in error.diagnosis or "signal 9" in error.diagnosis


def test_rank_hanging_past_max_run(ws):
    hang = 'print("hanging", flush=True)\ntime.sleep(3600)\n'
    plan = ws.plan(hang, strategy="single", max_run=3)
    record, error = ws.run(plan)
    assert record["status"] == "MaxRuntimeExceeded" and error is not None
    assert error.status == "MaxRuntimeExceeded"
    assert "max_run of 3 s exceeded" in error.diagnosis


def test_host_whose_script_is_missing(ws):
    plan = ws.plan('dist.init_process_group("gloo")\ndist.barrier()\n', strategy="torch_distributed", pph=1)
    # Hand-edit the plan: algo-2 runs a script that its code folder does not have.
    algo2 = plan.hosts[1]
    broken = algo2.model_copy(update={"argv": [("missing.py" if a == "train.py" else a) for a in algo2.argv]})
    plan = plan.model_copy(update={"hosts": [plan.hosts[0], broken]})
    record, error = ws.run(plan)
    assert record["status"] == "Failed" and error is not None
    assert "host algo-2" in error.diagnosis
    assert "missing.py" in error.diagnosis


@pytest.mark.parametrize("strategy", ["single", "torch_distributed", pytest.param("mpi", marks=pytest.mark.mpi)])
def test_shell_metacharacters_in_hyperparameters_are_just_text(ws, strategy):
    canaries = [ws.root / f"canary{i}" for i in range(3)]
    for c in canaries:
        c.mkdir()
    # If any of these reached a shell, a canary folder would vanish.
    values = {"a": f"$(rm -rf {canaries[0]})", "b": f"`rm -rf {canaries[1]}`", "c": f"x; rm -rf {canaries[2]}",
              "d": "quote ' \" and\nnewline"}
    script = ('with open(os.path.join(os.environ["SM_MODEL_DIR"], "argv.json"), "w") as f:\n'
              '    json.dump(sys.argv[1:], f)\n')
    # 2 hosts x 1: under mpirun the algo-2 rank goes through our rsh agent too
    plan = ws.plan(script, strategy=strategy, hosts=2, pph=1, hyperparameters=values)
    record, error = ws.run(plan)
    assert error is None, error
    assert all(c.is_dir() for c in canaries)
    import tarfile

    with tarfile.open(ws.jobs / plan.job_name / "output" / "model.tar.gz") as tar:
        argv = json.load(tar.extractfile("argv.json"))
    assert argv == [t for k in sorted(values) for t in (f"-{k}", values[k])]


def test_ctrl_c_stops_everything(ws):
    plan = ws.plan(ALL_UP_THEN.replace("{fault}", "time.sleep(3600)"), strategy="torch_distributed", pph=2, hosts=1)
    plan_file = ws.root / "plan.json"
    plan_file.write_text(plan.to_json(reveal_secrets=True))
    driver = (
        "import sys\nfrom smdist_launcher.plan.model import LaunchPlan\n"
        "from smdist_launcher.backends.local import run_job\n"
        "from smdist_launcher.errors import JobFailedError\n"
        f"plan = LaunchPlan.from_json(open({str(plan_file)!r}).read())\n"
        f"try:\n    run_job(plan, jobs_root={str(ws.jobs)!r}, logs=False)\n"
        "except JobFailedError as e:\n    print('STATUS', e.status)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", driver], stdout=subprocess.PIPE, text=True, cwd=ws.outside)
    log = ws.jobs / plan.job_name / "logs" / "algo-1.log"
    while not (log.is_file() and "ready 1" in log.read_text() and "ready 0" in log.read_text()):
        assert proc.poll() is None, (f"the driver ended before the ranks were up: {proc.communicate()[0]}\n"
                                     f"{log.read_text() if log.is_file() else ''}")
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=180)  # stops 2 ranks, collects their stacks, packs the outputs: a busy machine
    assert "STATUS Stopped" in out
    record = json.loads((ws.jobs / plan.job_name / "job.json").read_text())
    assert record["status"] == "Stopped"
    from smdist_launcher.backends.toolkit.process_sweep import job_processes

    assert job_processes(record["job_id"]) == []
    assert os.environ.get("SMDIST_JOB_ID") != record["job_id"]


def test_a_killed_launcher_leaves_no_job_behind(ws):
    """kill -9 of the launcher: the next command that reads the jobs folder finishes the job as Interrupted,
    packs what the hosts left, stops what is left of them and removes the job's temp folder."""
    import tarfile

    from smdist_launcher.backends.toolkit.process_sweep import job_processes

    script = ('import pathlib\n'
              'host = os.environ["SM_CURRENT_HOST"]\n'
              'pathlib.Path(os.environ["SM_MODEL_DIR"], f"weights-{host}.txt").write_text(host)\n'
              'pathlib.Path(os.environ["SM_OUTPUT_DATA_DIR"], f"metrics-{host}.txt").write_text(host)\n'
              'print("up", flush=True)\ntime.sleep(3600)\n')
    plan = ws.plan(script, strategy="single", hosts=2)
    plan_file = ws.root / "plan.json"
    plan_file.write_text(plan.to_json(reveal_secrets=True))
    driver = ("from smdist_launcher.plan.model import LaunchPlan\nfrom smdist_launcher.backends.local import run_job\n"
              f"run_job(LaunchPlan.from_json(open({str(plan_file)!r}).read()), "
              f"jobs_root={str(ws.jobs)!r}, logs=False)\n")
    proc = subprocess.Popen([sys.executable, "-c", driver], cwd=ws.outside)
    logs = [ws.jobs / plan.job_name / "logs" / f"algo-{i}.log" for i in (1, 2)]
    _wait_for_lines(logs, ["up", "up"], alive=lambda: proc.poll() is None)
    record = json.loads((ws.jobs / plan.job_name / "job.json").read_text())
    job_id, tmpdir = record["job_id"], record["local"]["tmpdir"]
    assert os.path.isdir(tmpdir)
    proc.kill()  # SIGKILL: the launcher gets no chance to clean up
    proc.wait()
    listing = subprocess.run([sys.executable, "-c", CLI, "jobs", "--jobs-dir", str(ws.jobs)],
                             capture_output=True, text=True, timeout=120, cwd=ws.outside)
    assert listing.returncode == 0, listing.stderr
    assert "Interrupted" in listing.stdout
    record = json.loads((ws.jobs / plan.job_name / "job.json").read_text())
    assert record["status"] == "Interrupted" and record["ended"] is not None  # final: recorded, not just shown
    assert f"launcher (pid {proc.pid}) died" in record["failure_reason"]
    output = ws.jobs / plan.job_name / "output"
    with tarfile.open(output / "model.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["weights-algo-1.txt", "weights-algo-2.txt"]
    with tarfile.open(output / "output.tar.gz") as tar:
        assert {"metrics-algo-1.txt", "metrics-algo-2.txt"} <= set(tar.getnames())
    assert record["model_data"] == (output / "model.tar.gz").as_uri()
    assert job_processes(job_id) == []
    assert not os.path.exists(tmpdir)
    # `smdist logs --follow` sees that no more output will come, and returns (the timeout only guards a hang).
    follow = subprocess.run([sys.executable, "-c", CLI, "logs", plan.job_name, "--follow", "--jobs-dir", str(ws.jobs)],
                            capture_output=True, text=True, timeout=120, cwd=ws.outside)
    assert follow.returncode == 0, follow.stderr
    assert "up" in follow.stdout and f"launcher (pid {proc.pid}) is gone" in follow.stderr


def _wait_for_lines(paths, needles, alive=lambda: True):
    """Until every log file holds its needle (the job's ranks are up)."""
    for _ in range(1200):
        if all(p.is_file() and n in p.read_text() for p, n in zip(paths, needles, strict=True)):
            return
        assert alive(), "the job ended before its ranks were up"
        time.sleep(0.1)
    raise AssertionError(f"never saw {needles} in {paths}")


def test_sigkill_of_a_host_runtime_names_that_host_not_its_victims(ws):
    from smdist_launcher.backends.local import run_job
    from smdist_launcher.errors import JobFailedError

    plan = ws.plan(ALL_UP_THEN.replace("{fault}", "time.sleep(3600)"), strategy="torch_distributed", pph=1)
    job = run_job(plan, jobs_root=ws.jobs, logs=False, wait=False)
    logs = [ws.jobs / plan.job_name / "logs" / f"algo-{i}.log" for i in (1, 2)]
    _wait_for_lines(logs, ["ready 0", "ready 1"])
    os.kill(job.record.hosts["algo-2"]["pid"], signal.SIGKILL)
    with pytest.raises(JobFailedError) as failed:
        job.wait()
    assert failed.value.status == "Failed"
    assert job.record.failure_reason.startswith("host algo-2 failed first with exit code -9 (SIGKILL)"), \
        job.record.failure_reason
    assert "host algo-1" not in job.record.failure_reason
    assert job.record.hosts["algo-2"]["exit_code"] == -9
    from smdist_launcher.backends.toolkit.process_sweep import job_processes

    assert job_processes(job.record.job_id) == []


def test_sighup_when_the_terminal_closes_stops_the_job_in_order(ws):
    """The launcher's controlling terminal goes away (terminal closed, ssh dropped): the kernel sends SIGHUP."""
    import fcntl
    import pty
    import tarfile
    import termios

    script = ('open(os.path.join(os.environ["SM_MODEL_DIR"], "partial.txt"), "w").write("kept")\n'
              'print("hanging-now", flush=True)\ntime.sleep(3600)\n')
    (ws.src).mkdir(exist_ok=True)
    (ws.src / "train.py").write_text(PRELUDE + script)
    job_file = ws.root / "job.yaml"
    job_file.write_text(f"framework: pytorch\nentry_point: train.py\nsource_dir: {ws.src}\ninstance_type: local\n"
                        "instance_count: 2\nframework_version: '2.3'\npy_version: py311\n")
    master, slave = pty.openpty()

    def controlling_terminal() -> None:  # in the child: the pty becomes the new session's terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([sys.executable, "-c", CLI, "run", str(job_file), "--job-name", "hangup",
                             "--jobs-dir", str(ws.jobs)], stdin=slave, stdout=slave, stderr=slave, cwd=ws.outside,
                            start_new_session=True, preexec_fn=controlling_terminal)
    os.close(slave)
    logs = [ws.jobs / "hangup" / "logs" / f"algo-{i}.log" for i in (1, 2)]
    seen = b""
    for _ in range(1200):  # drain the terminal while the hosts start (a full pty would block the launcher)
        if all(p.is_file() and "hanging-now" in p.read_text() for p in logs):
            break
        assert proc.poll() is None, seen.decode(errors="replace")
        if select.select([master], [], [], 0.1)[0]:
            seen += os.read(master, 65536)
    else:
        raise AssertionError(f"the hosts never came up: {seen.decode(errors='replace')}")
    os.close(master)  # hang up
    assert proc.wait(timeout=120) != 0
    record = json.loads((ws.jobs / "hangup" / "job.json").read_text())
    assert record["status"] == "Stopped" and record["failure_reason"].startswith("stopped by SIGHUP; still running:")
    with tarfile.open(ws.jobs / "hangup" / "output" / "model.tar.gz") as tar:
        assert "partial.txt" in tar.getnames()
    assert "hanging-now" in logs[1].read_text()
    # lines that came after the terminal was gone still reached the log files
    assert all("received SIGTERM: stopping every process of this host" in p.read_text() for p in logs)
    from smdist_launcher.backends.toolkit.process_sweep import job_processes

    assert job_processes(record["job_id"]) == []


def test_stopping_a_hung_job_names_the_ranks_still_running_and_where_they_were_stuck(ws):
    from smdist_launcher.backends.local import run_job
    from smdist_launcher.errors import JobFailedError

    fault = ('def stuck_in_named_function():\n    print("entering the hang", flush=True)\n    time.sleep(3600)\n'
             'if rank == 3:\n    stuck_in_named_function()')
    plan = ws.plan(ALL_UP_THEN.replace("{fault}", fault), strategy="torch_distributed")  # 2 hosts x 2
    job = run_job(plan, jobs_root=ws.jobs, logs=False, wait=False)
    logs = [ws.jobs / plan.job_name / "logs" / f"algo-{i}.log" for i in (1, 2)]
    _wait_for_lines(logs, ["ready 1", "entering the hang"])
    job.stop("stopped by Ctrl-C")  # what Ctrl-C does: the same path
    with pytest.raises(JobFailedError) as failed:
        job.wait()
    assert failed.value.status == "Stopped"
    reason = job.record.failure_reason
    assert "still running:" in reason and "host algo-2, rank 3" in reason
    assert "in stuck_in_named_function (train.py:" in reason
    diagnosis = failed.value.diagnosis
    assert "Ranks still running when stopped" in diagnosis
    for rank in (0, 1, 2):  # stuck in the collective, waiting for rank 3: named too, with their own stack
        assert f"rank {rank} (pid" in diagnosis
    assert 'in stuck_in_named_function' in diagnosis and "all_reduce" in diagnosis
    log2 = logs[1].read_text()
    assert "[algo-2 r3] still running when stopped" in log2 and "stuck_in_named_function" in log2


def test_a_rank_that_exits_0_early_is_named(ws):
    """Rank 1 leaves without an error while rank 0 waits for it in a collective: not a failure of rank 1's own,
    but the cause; the diagnosis names it (max_run only bounds a hang)."""
    fault = 'if rank == 1:\n    sys.exit(0)'
    plan = ws.plan(ALL_UP_THEN.replace("{fault}", fault), strategy="torch_distributed", pph=1, max_run=120)
    record, error = ws.run(plan)
    assert error is not None and record["status"] in ("Failed", "MaxRuntimeExceeded"), record
    assert "rank 1 (algo-2) exited 0 at " in error.diagnosis, error.diagnosis
    assert "while rank 0 was still running" in error.diagnosis
    assert "rank 1 (algo-2) exited 0 at " in record["failure_reason"]
