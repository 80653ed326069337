"""Stress benchmark for the gloo abort at interpreter exit (docs/exit-abort.md).

Runs N small 2-host jobs through `smdist run` (each host 1 process; torchrun and mpirun launches, the gloo and the
smddp backends) while busy loops load the machine, and, side by side with each of them, the same training script
under plain `torchrun` (two nodes on loopback, gloo, no project code) as the control. Every job trains a tiny DDP
model a few steps and ends without destroy_process_group(), as most SageMaker scripts do.

    .venv/bin/python benchmarks/exit_abort.py --jobs 50 --busy 2 [--out results.json]

--jobs is per variant of ours (4 variants); the control runs as many jobs as ours in total. Prints one line per
failure and a summary: jobs, failures, aborts (SIGABRT / "terminate called"), for ours and the control.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMDIST = [sys.executable, "-m", "smdist_launcher.cli.main"]

SCRIPT = """
import os, sys
import torch, torch.distributed as dist
backend = sys.argv[sys.argv.index("--backend") + 1] if "--backend" in sys.argv else "gloo"
if backend == "smddp":
    import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401 - registers "smddp"
elif "OMPI_COMM_WORLD_RANK" in os.environ:  # plain mpirun: torch's env:// reads RANK/WORLD_SIZE
    os.environ.setdefault("RANK", os.environ["OMPI_COMM_WORLD_RANK"])
    os.environ.setdefault("WORLD_SIZE", os.environ["OMPI_COMM_WORLD_SIZE"])
dist.init_process_group(backend)
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
t = torch.ones(1)
dist.all_reduce(t)
print("world", int(t.item()), "done", flush=True)
"""

JOB = """framework: pytorch
base_job_name: exit-{name}
entry_point: train.py
source_dir: .
instance_type: local
instance_count: 2
framework_version: "2.3"
py_version: py311
hyperparameters: {{backend: {backend}}}
distribution: {distribution}
environment: {environment}
"""

VARIANTS = {  # name: (distribution, backend)
    "torchrun-gloo": ("{torch_distributed: {enabled: true}}", "gloo"),
    "torchrun-smddp": ("{torch_distributed: {enabled: true}}", "smddp"),
    "mpirun-gloo": ("{mpi: {enabled: true, processes_per_host: 1}}", "gloo"),
    "smddprun-smddp": ("{pytorchddp: {enabled: true}}", "smddp"),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def aborted(text: str, codes: list[int]) -> bool:
    return "terminate called" in text or -signal.SIGABRT in codes or 128 + signal.SIGABRT in codes or \
        "SIGABRT" in text or "Signal 6" in text


def run_ours(work: Path, variant: str, i: int) -> dict:
    job_name = f"exit-{variant}-{i}"
    p = subprocess.run([*SMDIST, "run", str(work / f"{variant}.yaml"), "--quiet", "--job-name", job_name,
                        "--jobs-dir", str(work / "jobs")], capture_output=True, text=True, timeout=600)
    logs = "".join(f.read_text(errors="replace") for f in (work / "jobs" / job_name).rglob("*.log"))
    return {"kind": "ours", "variant": variant, "i": i, "ok": p.returncode == 0,
            "abort": aborted(p.stdout + p.stderr + logs, [p.returncode]),
            "tail": (p.stdout + p.stderr)[-600:]}


def run_control(work: Path, i: int) -> dict:
    port = free_port()
    base = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1",
            "--master_addr", "127.0.0.1", "--master_port", str(port)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no project code at all
    procs = [subprocess.Popen([*base, "--node_rank", str(r), str(work / "control" / "train.py")], cwd=work / "control",
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) for r in (0, 1)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    codes = [p.returncode for p in procs]
    text = "".join(outs)
    return {"kind": "control", "variant": "plain-torchrun-gloo", "i": i, "ok": codes == [0, 0],
            "abort": aborted(text, codes), "tail": text[-600:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=50, help="jobs per variant of ours (4 variants)")
    ap.add_argument("--busy", type=int, default=2, help="busy loops loading the machine")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--parallel", type=int, default=4, help="jobs in flight at once (ours and control interleaved)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--without-mitigation", action="store_true",
                    help="ours with SMDIST_EXIT_TEARDOWN=always: the rank entry tears the interpreter down as plain "
                         "python does (to see our launchers abort too; cores land in each host's code folder with "
                         "`ulimit -c unlimited`)")
    args = ap.parse_args()
    variants = args.variants.split(",")
    work = Path(tempfile.mkdtemp(prefix="smdist-exit-abort-"))
    (work / "train.py").write_text(SCRIPT)
    (work / "control").mkdir()
    (work / "control" / "train.py").write_text(SCRIPT)
    for name in variants:
        dist, backend = VARIANTS[name]
        environment = "{SMDIST_EXIT_TEARDOWN: always}" if args.without_mitigation else "{}"
        (work / f"{name}.yaml").write_text(JOB.format(name=name, backend=backend, distribution=dist,
                                                      environment=environment))
    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(args.busy)]
    results: list[dict] = []
    start = time.time()
    try:
        # Ours and the control interleaved, `--parallel` jobs in flight: both see the same load all along.
        schedule = [(v, i) for i in range(args.jobs) for v in variants]
        with ThreadPoolExecutor(args.parallel) as pool:
            futures = []
            for n, (variant, i) in enumerate(schedule):
                futures += [pool.submit(run_ours, work, variant, i), pool.submit(run_control, work, n)]
            for n, f in enumerate(futures):
                r = f.result()
                results.append(r)
                if not r["ok"]:
                    print(f"FAILED {r['kind']} {r['variant']} #{r['i']} abort={r['abort']}: "
                          f"{r['tail'][-300:]!r}", flush=True)
                if (n + 1) % 20 == 0:
                    print(f"{n + 1}/{len(futures)} jobs, {time.time() - start:.0f} s", flush=True)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    summary = {}
    for kind in ("ours", "control"):
        rs = [r for r in results if r["kind"] == kind]
        summary[kind] = {"jobs": len(rs), "failed": sum(not r["ok"] for r in rs),
                         "aborts": sum(r["abort"] for r in rs),
                         "by_variant": {v: {"jobs": sum(r["variant"] == v for r in rs),
                                            "failed": sum(r["variant"] == v and not r["ok"] for r in rs),
                                            "aborts": sum(r["variant"] == v and r["abort"] for r in rs)}
                                        for v in sorted({r["variant"] for r in rs})}}
    import torch

    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.node(),
            "cores": os.cpu_count(), "torch": torch.__version__, "python": platform.python_version(),
            "busy_loops": args.busy, "parallel": args.parallel, "without_mitigation": args.without_mitigation,
            "wall_s": round(time.time() - start), "work": str(work)}
    print(json.dumps({"meta": meta, "summary": summary}, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"meta": meta, "summary": summary, "failures": [r for r in results
                                                                                      if not r["ok"]]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
