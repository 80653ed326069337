"""What each Slurm node runs (`python -m smdist_launcher.backends.slurm.node JOB_DIR`, one task per node).

Slurm numbers the nodes of an allocation 0..N-1 in the order of SLURM_JOB_NODELIST; node i is plan host
algo-<i+1>. The node turns the allocation into what a local-mode host gets from its launcher (the host map, the
other hosts' /opt/ml roots on the shared job folder, the job marker, a private TMPDIR) and execs smdist-train.
mpirun-based plans start their remote orteds through each node's own runtime (the token-protected orted service
of container/rsh_server.py), not through Slurm's launcher, so every rank sees its own host's SM_* environment.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ...contract import write_host_config
from ...contract.secrets import REDACTED, SECRET_HPS_ENV
from ...plan.model import LaunchPlan
from ..local.host_environment import host_environment
from ..local.localize import with_master_port
from ..toolkit.job_console import SilentConsole
from ..toolkit.job_metrics import MetricsSettings, job_recorder, sampled_hosts
from ..toolkit.jobdir import JobDir
from ..toolkit.log_mux import LogMux
from ..toolkit.outputs import checkpoint_dir
from ..toolkit.process_sweep import JOB_ID_ENV
from ..toolkit.records import JobRecord
from ..toolkit.resilience_plan import ATTEMPT_ENV
from .attempts import EXITS_DIR
from .node_faults import NodeFaults

# Ports 20000-39999: every node derives the same one from the Slurm job id, and jobs sharing nodes differ.
_PORT_BASE, _PORT_SPAN = 20000, 20000


def node_names(nodelist: str) -> list[str]:
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    return out.split()


def node_address(node: str) -> str:
    """The node's NodeAddr (what slurm.conf routes to), else its name."""
    out = subprocess.run(["scontrol", "show", "node", "-o", node], capture_output=True, text=True, timeout=60).stdout
    for field in out.split():
        if field.startswith("NodeAddr="):
            return field.partition("=")[2] or node
    return node


def master_port(slurm_job_id: str) -> int:
    return _PORT_BASE + int(slurm_job_id) % _PORT_SPAN


def _gpus() -> list[str] | None:
    """The GPUs Slurm gave this node (CUDA_VISIBLE_DEVICES from --gpus-per-node), None on CPU nodes."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return [g for g in visible.split(",") if g]
    return None


def host_launch(job: JobDir, node_id: int, nodes: list[str], slurm_job_id: str,
                environ: dict[str, str]) -> tuple[list[str], dict[str, str], str]:
    """(argv, env, host) of this node's smdist-train."""
    plan = LaunchPlan.from_json(job.plan_file.read_text())
    record = JobRecord.load(job.record_file)
    if len(nodes) != len(plan.hosts):
        raise SystemExit(f"smdist: the allocation has {len(nodes)} nodes but the plan has {len(plan.hosts)} hosts")
    host = plan.host_names[node_id]
    addresses = {h: node_address(n) for h, n in zip(plan.host_names, nodes, strict=True)}
    run_plan = with_master_port(plan, master_port(slurm_job_id))
    paths = write_host_config(job.host_root(host), run_plan.to_dict(), host,
                              channels={name: "File" for name in plan.channels})
    host_roots = {h: str(job.host_root(h)) for h in plan.host_names}
    # Slurm's own variables would make mpirun start orteds with srun (ranks would then get the master's
    # environment) and confuse launchers that read them: the host sees a SageMaker-like host, not a Slurm task.
    clean = {k: v for k, v in environ.items() if not k.startswith(("SLURM_", "SLURMD_", "SRUN_"))}
    env = host_environment(run_plan, host, clean, job_id=record.job_id, addresses=addresses, host_roots=host_roots,
                           gpus=_gpus(), checkpoint_dir=str(checkpoint_dir(plan, paths)))
    # plan.json holds secrets redacted; their values came through sbatch's environment.
    for key, value in list(env.items()):
        if value == REDACTED and key in environ:
            env[key] = environ[key]
    if SECRET_HPS_ENV in environ:
        env[SECRET_HPS_ENV] = environ[SECRET_HPS_ENV]
    env["SMDIST_SLURM_JOB_ID"] = slurm_job_id
    env[ATTEMPT_ENV] = environ.get(ATTEMPT_ENV) or "1"  # set by the attempt loop for each later step (attempts.py)
    argv = [sys.executable, "-m", "smdist_launcher.container", "--root", str(paths.root), "--host", host,
            "--plan", str(paths.plan_file), "--no-install"]
    return argv, env, host


def record_exit(job: JobDir, host: str, code: int, log_failure: str | None = None) -> None:
    """How this node's runtime ended, for the attempt loop: a runtime killed outright (no failure.json) is a lost
    host, and the first one to go is the cause (attempts.py). `log_failure`: the node's log consumer failed (the job
    fails with it)."""
    exits = job.root / EXITS_DIR
    exits.mkdir(parents=True, exist_ok=True)
    entry: dict[str, object] = {"host": host, "code": code, "time": time.time()}
    if log_failure is not None:
        entry["log_failure"] = log_failure
    (exits / f"{host}.json").write_text(json.dumps(entry))


def _plan_hosts(job: JobDir) -> list[str]:
    return [h.name for h in LaunchPlan.from_json(job.plan_file.read_text()).hosts]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m smdist_launcher.backends.slurm.node JOB_DIR (run by the job's sbatch script)",
              file=sys.stderr)
        return 2
    job = JobDir(Path(args[0]))
    environ = dict(os.environ)
    node_id = int(environ["SLURM_NODEID"])
    nodes = node_names(environ["SLURM_JOB_NODELIST"])
    run_argv, env, host = host_launch(job, node_id, nodes, environ["SLURM_JOB_ID"], environ)
    # Open MPI's session dirs and the script's temp files stay on this node, one folder per host.
    tmp = tempfile.mkdtemp(prefix=f"smdist-{host}-")
    env["TMPDIR"] = tmp
    # Every node files its lines into the job's logs/<host>.log by their prefix, as the local backend does
    # (mpirun relays algo-2's ranks through algo-1): `smdist logs` reads them, a waiting launcher follows them.
    # The node's metrics (metric_definitions over its lines, its system samples) go to metrics.<host>.jsonl of
    # the job folder: the definitions came in the job folder, so the sbatch script is the same for every job.
    metrics = job_recorder(job.root, MetricsSettings.load(job.root), host=host)
    plan = LaunchPlan.from_json(job.plan_file.read_text())
    faults = NodeFaults(job, host, {r: h.name for h in plan.hosts for r in h.ranks},
                        env[JOB_ID_ENV], int(env[ATTEMPT_ENV]),
                        lambda text: mux.on_line(host, f"[{host}] {text}\n".encode()))
    # A log consumer that fails (a full jobs folder) stops the runtime; the reader drains on until it has gone.
    mux = LogMux({h: job.log_file(h) for h in _plan_hosts(job)}, SilentConsole(), on_rank_line=metrics.line,
                 on_new_rank=lambda _rank: faults.rank_up(proc), on_error=lambda _message: proc.terminate())
    proc = subprocess.Popen(run_argv, env=env, cwd=str(job.host_dir(host)), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    metrics.start_sampling(sampled_hosts({host: proc.pid}, {host: job.host_root(host)}, {host: _gpus() or []}))

    # Forward srun's SIGTERM/SIGINT (scancel, --kill-on-bad-exit) to the runtime, which stops its ranks.
    def forward(signum: int, _frame: object) -> None:
        proc.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    try:
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, b""):
            mux.on_line(host, line)
        code = proc.wait()
        if mux.failure is not None and code == 0:
            code = 1
        record_exit(job, host, code, mux.failure)
    finally:
        faults.cancel()
        metrics.close()
        mux.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
