"""Launch a worker script under torchrun (gloo, CPU) and collect its "RESULT {json}" lines."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "src" / "smdist_launcher" / "compat" / "site"


def stop_tree(proc: subprocess.Popen[str]) -> None:
    """Stop torchrun and every rank it started: its ranks run in sessions of their own, so neither killing torchrun
    nor its process group reaches them (a timed-out test left them running, holding the output pipes open)."""
    try:
        me = psutil.Process(proc.pid)
        tree = [me, *me.children(recursive=True)]
    except psutil.NoSuchProcess:  # it ended just now: nothing of it left to stop
        return
    proc.terminate()  # torchrun stops its ranks on SIGTERM
    _gone, alive = psutil.wait_procs(tree, timeout=15)
    for p in alive:
        p.kill()
    psutil.wait_procs(alive, timeout=15)


def torchrun(script: Path | str, nproc: int, args: list[str] | None = None, env: dict[str, str] | None = None,
             timeout: float = 240) -> tuple[dict[str, dict], str]:
    """Run ``script`` on ``nproc`` local ranks (free port: --standalone); returns (rows by check, output)."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1",
                "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(SITE), os.environ.get("PYTHONPATH", "")]),
                **(env or {})}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           str(script), *(args or [])]
    with subprocess.Popen(cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          cwd=REPO) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_tree(proc)
            stdout, stderr = proc.communicate()
            raise AssertionError(f"{script} timed out after {timeout}s:\n{(stdout + stderr)[-6000:]}") from None
    output = stdout + stderr
    if proc.returncode != 0:
        raise AssertionError(f"{script} failed (exit {proc.returncode}):\n{output[-6000:]}")
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            row = json.loads(line[len("RESULT "):])
            rows[row.get("check", str(len(rows)))] = row
    return rows, output
