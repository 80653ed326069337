"""Shared launchers for the smddp tests: N real processes on free ports/files, real gloo/NCCL."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("dist_worker.py")
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def run_ranks(tmp_path: Path):
    """run_ranks(scenario, world_size, device) -> combined output; fails with every rank's log."""

    def _run(scenario: str, world_size: int, device: str = "cpu", timeout: float = 240) -> str:
        init_file = tmp_path / f"init-{scenario.replace(',', '_')}-{world_size}-{device}"
        env = dict(os.environ, PYTHONPATH=f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", OMP_NUM_THREADS="1")
        env.setdefault("NCCL_NVLS_ENABLE", "0")
        env.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
        procs = [
            subprocess.Popen(
                [sys.executable, "-W", "ignore", str(WORKER), scenario, str(r), str(world_size), str(init_file),
                 device],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                text=True,
            )
            for r in range(world_size)
        ]
        outputs = []
        try:
            for p in procs:
                out, _ = p.communicate(timeout=timeout)
                outputs.append(out)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        failed = [r for r, p in enumerate(procs) if p.returncode != 0]
        log = "\n".join(f"--- rank {r} (rc={p.returncode}) ---\n{o[-4000:]}"
                        for r, (p, o) in enumerate(zip(procs, outputs, strict=True)))
        assert not failed, f"ranks {failed} failed:\n{log}"
        return log

    return _run
