"""`smdist jobs`: the whole job name in any terminal width, and quiet ends of a closed pipe."""
from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

from .jobfolders import make_job

SMDIST = str(Path(sys.executable).with_name("smdist"))


def _in_terminal(args: list[str], columns: int, env: dict[str, str]) -> str:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(args, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL,
                            env={**env, "COLUMNS": str(columns)})
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=120) == 0
    return b"".join(chunks).decode()


def test_job_names_are_never_cut_in_a_120_column_terminal(tmp_path: Path) -> None:
    root = tmp_path / "jobs"
    name = "mnist-torch-distributed-2026-11-23-14-03-59-123-with-a-long-tail"[:63]
    make_job(root, name, "Failed", reason="host algo-2, rank 3 failed first with exit code 1: " + "x" * 200)
    out = _in_terminal([SMDIST, "jobs", "--jobs-dir", str(root)], 120, dict(os.environ))
    lines = [line for line in out.replace("\r", "").splitlines() if line.strip()]
    assert any(line.startswith(name + " ") for line in lines), out
    assert all(len(line) <= 120 for line in lines), out   # the long result is what gets shortened


def test_closed_pipe_ends_quietly_for_jobs_and_logs(tmp_path: Path) -> None:
    root = tmp_path / "jobs"
    make_job(root, "a-1", log="step 1 loss 2.3\n" * 20000)
    for command in (["jobs"], ["logs", "a-1"]):
        read_end, write_end = os.pipe()
        os.close(read_end)  # like `| head` that has already exited: every write gets EPIPE
        proc = subprocess.run([SMDIST, *command, "--jobs-dir", str(root)], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
        os.close(write_end)
        assert proc.stderr == "", proc.stderr          # no BrokenPipeError traceback
        assert proc.returncode == 141                  # what a tool killed by SIGPIPE reports
