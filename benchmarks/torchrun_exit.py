"""Stress benchmark for torchrun's exit-barrier race (issue 32, container/torchrun_agent.py).

Runs N completed 2-host torchrun jobs through `smdist run` (1 process per host, gloo, a tiny all_reduce) while busy
loops load the machine, and side by side the same script under plain `torchrun` (two agents on loopback, no project
code: the control). Counts the consoles that hold a traceback or a warning/error line of torch's agents
(`[W...]`/`[E...]`, `Error waiting on exit barrier`): target 0 for ours.

    .venv/bin/python benchmarks/torchrun_exit.py --jobs 30 --busy 2 [--parallel 2] [--out results.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SMDIST = [sys.executable, "-m", "smdist_launcher.cli.main"]
SCRIPT = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
print("world", int(t.item()), "done", flush=True)
"""
JOB = """framework: pytorch
base_job_name: torchrun-exit
entry_point: train.py
source_dir: .
instance_type: local
instance_count: 2
framework_version: "2.3"
py_version: py311
distribution: {torch_distributed: {enabled: true}}
"""
# torch's C++ and agent log lines at warning/error level, a Python traceback, the barrier's own message
NOISE = re.compile(r"^(\[[^\]]*\] )*\[?[EW]\d{4} |Traceback \(most recent call last\)|Error waiting on exit barrier",
                   re.M)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ours(work: Path, i: int) -> dict:
    name = f"torchrun-exit-{i}"
    p = subprocess.run([*SMDIST, "run", str(work / "job.yaml"), "--job-name", name, "--jobs-dir", str(work / "jobs")],
                       capture_output=True, text=True, timeout=600)
    console = p.stdout + p.stderr
    return {"kind": "ours", "i": i, "ok": p.returncode == 0, "noisy": bool(NOISE.search(console)),
            "tail": console[-800:]}


def run_control(work: Path, i: int) -> dict:
    base = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc_per_node", "1",
            "--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    procs = [subprocess.Popen([*base, "--node_rank", str(r), "train.py"], cwd=work / "control", env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    console = "".join(p.communicate(timeout=600)[0] for p in procs)
    return {"kind": "control", "i": i, "ok": all(p.returncode == 0 for p in procs),
            "noisy": bool(NOISE.search(console)), "tail": console[-800:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=30, help="jobs of ours (and as many of the control)")
    ap.add_argument("--busy", type=int, default=2, help="busy loops loading the machine")
    ap.add_argument("--parallel", type=int, default=2, help="jobs in flight (ours and the control interleaved)")
    ap.add_argument("--no-control", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="smdist-torchrun-exit-"))
    (work / "train.py").write_text(SCRIPT)
    (work / "job.yaml").write_text(JOB)
    (work / "control").mkdir()
    (work / "control" / "train.py").write_text(SCRIPT)
    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(args.busy)]
    start, results = time.time(), []
    try:
        with ThreadPoolExecutor(args.parallel) as pool:
            futures = []
            for i in range(args.jobs):
                futures.append(pool.submit(run_ours, work, i))
                if not args.no_control:
                    futures.append(pool.submit(run_control, work, i))
            for f in futures:
                r = f.result()
                results.append(r)
                if r["noisy"] or not r["ok"]:
                    print(f"{r['kind']} #{r['i']} ok={r['ok']} noisy={r['noisy']}: {r['tail'][-400:]!r}", flush=True)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    summary = {kind: {"jobs": sum(r["kind"] == kind for r in results),
                      "failed": sum(r["kind"] == kind and not r["ok"] for r in results),
                      "consoles_with_traceback_or_E_W": sum(r["kind"] == kind and r["noisy"] for r in results)}
               for kind in ("ours", "control")}
    import torch

    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.node(),
            "cores": os.cpu_count(), "torch": torch.__version__, "busy_loops": args.busy, "parallel": args.parallel,
            "wall_s": round(time.time() - start)}
    print(json.dumps({"meta": meta, "summary": summary}, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"meta": meta, "summary": summary,
                                        "noisy": [r for r in results if r["noisy"] or not r["ok"]]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
