"""Launch a worker script under torchrun (gloo, CPU) and collect its "RESULT {json}" lines."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "src" / "smdist_launcher" / "compat" / "site"


def torchrun(script: Path | str, nproc: int, args: list[str] | None = None, env: dict[str, str] | None = None,
             timeout: float = 240) -> tuple[dict[str, dict], str]:
    """Run ``script`` on ``nproc`` local ranks (free port: --standalone); returns (rows by check, output)."""
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1",
                "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(SITE), os.environ.get("PYTHONPATH", "")]),
                **(env or {})}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           str(script), *(args or [])]
    proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise AssertionError(f"{script} failed (exit {proc.returncode}):\n{output[-6000:]}")
    rows = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            row = json.loads(line[len("RESULT "):])
            rows[row.get("check", str(len(rows)))] = row
    return rows, output
