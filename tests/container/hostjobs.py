"""Test helpers: hand-made plans and /opt/ml trees for 2 simulated hosts, each runtime on its own loopback address."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from smdist_launcher.contract import encode_hyperparameters, write_host_config

VENV_BIN = str(Path(sys.executable).parent)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_plan(kind: str, *, hosts: int = 2, ppn: int = 2, entry: str = "train.py", hps: dict[str, Any] | None = None,
              port: int | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """kind: python | torchrun | mpirun. Shapes follow plan/model.py (LaunchPlan.to_dict())."""
    names = [f"algo-{i + 1}" for i in range(hosts)]
    port = port or free_port()
    hps = dict(hps or {})
    sm_hps = encode_hyperparameters({**hps, "sagemaker_program": entry, "sagemaker_job_name": "job-test",
                                     "sagemaker_container_log_level": 20, "sagemaker_region": "us-west-2"})
    if kind == "mpirun":
        sm_hps["sagemaker_mpi_enabled"] = "true"
    host_plans = []
    for i, name in enumerate(names):
        ranks = list(range(i * ppn, (i + 1) * ppn))
        if kind == "torchrun":
            role, argv = "node", ["torchrun", "--nnodes", str(hosts), "--nproc_per_node", str(ppn), "--master_addr",
                                  names[0], "--master_port", str(port), "--node_rank", str(i), entry]
        elif kind == "mpirun":
            role = "mpi_master" if i == 0 else "mpi_worker"
            argv = [] if i else [
                "mpirun", "--host", ",".join(f"{h}:{ppn}" for h in names), "-np", str(ppn * hosts),
                "--allow-run-as-root", "--tag-output", "-mca", "btl_tcp_if_include", "lo",
                "-mca", "oob_tcp_if_include", "lo", "-mca", "plm_rsh_no_tree_spawn", "1", "-mca", "pml", "ob1",
                "-mca", "btl", "^openib", "-mca", "orte_abort_on_non_zero_status", "1",
                "-x", "PATH", "-x", "PYTHONPATH", "python", "-m", "mpi4py", entry]
        else:
            role, argv = "node", ["python", entry]
        host_plans.append({"name": name, "role": role, "processes": ppn, "ranks": ranks, "argv": argv, "env": {}})
    return {
        "schema_version": 1, "job_name": "job-test", "framework": "pytorch",
        "launcher": {"torchrun": "torchrun", "mpirun": "mpirun"}.get(kind, "python"), "strategy": kind,
        "instance_type": "local", "instance_count": hosts, "processes_per_host": ppn, "world_size": hosts * ppn,
        "network_interface": "lo", "master": {"host": names[0], "port": port}, "entry_point": entry,
        "source_dir": None, "hosts": host_plans, "hyperparameters": hps, "sagemaker_hyperparameters": sm_hps,
        "channels": {"training": {"uri": "file:///data", "input_mode": "File", "content_type": None,
                                  "distribution": "FullyReplicated"}},
        "environment": dict(env or {}), "max_run": None, "output_path": None,
        "checkpoint_s3_uri": None, "checkpoint_local_path": None,
    }


class Job:
    """One job dir with a root per host; starts one runtime per host like the local backend will."""

    def __init__(self, base: Path, plan: dict[str, Any], script: str, loopback_base: int) -> None:
        self.base = base
        self.plan = plan
        self.job_id = f"smdist-test-{uuid.uuid4().hex[:12]}"
        self.names = [h["name"] for h in plan["hosts"]]
        self.roots = {n: base / "hosts" / n / "opt" / "ml" for n in self.names}
        self.host_map = {n: f"127.0.{loopback_base}.{i + 2}" for i, n in enumerate(self.names)}
        self.procs: dict[str, subprocess.Popen[str]] = {}
        # One TMPDIR per host, as the local backend gives them: two orteds on one machine racing to create the same
        # OpenMPI session directory fail ("File exists"). Short paths: OpenMPI puts unix sockets there.
        self.tmp = Path(tempfile.mkdtemp(prefix="smdist-t-"))
        for n in self.names:
            (self.tmp / n).mkdir()
            paths = write_host_config(self.roots[n], plan, n)
            (paths.code_dir / plan["entry_point"]).write_text(script)

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SMDIST_", "OMPI_", "PMIX_"))}
        env.update({
            "SMDIST_JOB_ID": self.job_id, "SMDIST_HOST_MAP": json.dumps(self.host_map),
            "SMDIST_LOCAL_HOSTS": json.dumps({n: str(r) for n, r in self.roots.items()}),
            "SMDIST_NUM_GPUS": "0", "SMDIST_WORKER_WAIT_S": "180", "OMP_NUM_THREADS": "1",
            "PATH": VENV_BIN + os.pathsep + os.environ.get("PATH", ""),
        })
        env.update(extra or {})
        return env

    def start(self, extra_env: dict[str, str] | None = None,
              host_env: dict[str, dict[str, str]] | None = None) -> None:
        for n in self.names:
            self.procs[n] = subprocess.Popen(
                [sys.executable, "-m", "smdist_launcher.container", "--root", str(self.roots[n]), "--no-install"],
                env=self.env({"TMPDIR": str(self.tmp / n), **(extra_env or {}), **(host_env or {}).get(n, {})}),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def wait(self, timeout: float = 240) -> dict[str, tuple[int, str]]:  # 2 torchruns + 4 ranks import torch
        out = {}
        for n, p in self.procs.items():
            try:
                text, _ = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                text, _ = p.communicate()
                raise AssertionError(f"runtime of {n} did not finish within {timeout} s:\n{text}") from None
            out[n] = (p.returncode, text)
        shutil.rmtree(self.tmp, ignore_errors=True)
        return out

    def kill(self) -> None:
        for p in self.procs.values():
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def failure(self, host: str) -> dict[str, Any]:
        return json.loads((self.roots[host] / "output" / "failure.json").read_text())


def wait_for_files(job: Job, files: list[Path], timeout: float = 180) -> None:
    """Until every file exists (processes of the job report readiness this way); fails if a runtime ends first."""
    deadline = time.monotonic() + timeout
    while not all(f.exists() for f in files):
        if time.monotonic() > deadline or any(p.poll() is not None for p in job.procs.values()):
            job.kill()
            raise AssertionError(f"not ready: {[(h, p.communicate()[0]) for h, p in job.procs.items()]}")
        time.sleep(0.1)


def sigterm_runtimes_and_check(job: Job, min_processes: int) -> None:
    """SIGTERM every host's runtime (as a backend stops a job): each fails with SIGTERM and nothing survives."""
    assert len(job_processes(job.job_id)) >= min_processes
    for p in job.procs.values():
        os.kill(p.pid, signal.SIGTERM)
    outputs = job.wait(timeout=180)
    assert all(code == 1 for code, _ in outputs.values()), outputs
    assert all(job.failure(h)["signal"] == "SIGTERM" for h in job.names)
    assert job_processes(job.job_id) == []


def job_processes(job_id: str) -> list[int]:
    """Every live process (not a zombie) whose environment carries this job's marker."""
    found = []
    marker = f"SMDIST_JOB_ID={job_id}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if marker in environ and state != b"Z":
            found.append(int(entry))
    return found


def mpirun_available() -> bool:
    return shutil.which("mpirun") is not None
