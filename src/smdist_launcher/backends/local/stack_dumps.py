"""Where each still-running rank was stuck, asked for just before a hung job is stopped (max_run, Ctrl-C, stop()).

Every rank registers a faulthandler dump on SIGUSR2 into <host>/run/stacks/<pid>.txt (the compat
sitecustomize: a JSON header line, then the dump). Here we signal the live ones, wait briefly for the
dumps and read them back. A rank that already exited has no live process: it is not named."""
from __future__ import annotations

import json
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from .process_sweep import job_processes

DUMP_SIGNAL = signal.SIGUSR2
WAIT_S = 3.0
POLL_S = 0.05
MAX_DUMP_LINES = 60
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>.+)$')


@dataclass(frozen=True)
class RankStack:
    host: str
    rank: int
    pid: int
    dump: list[str]  # faulthandler's lines, most recent call first per thread

    @property
    def where(self) -> str:
        """The innermost frame of the main thread (the one whose outermost frame is <module>): "f (train.py:12)"."""
        threads: list[list[re.Match[str]]] = []
        for line in self.dump:
            if line.startswith(("Thread ", "Current thread ")):
                threads.append([])
            elif (m := _FRAME.match(line)) and threads:
                threads[-1].append(m)
        frames = next((t for t in threads if t and t[-1]["func"] == "<module>"), None) or next(
            (t for t in threads if t), None)
        if not frames:
            return "no Python frame in the dump"
        top = frames[0]
        return f"in {top['func']} ({os.path.basename(top['file'])}:{top['line']})"

    def describe(self) -> str:
        return f"host {self.host}, rank {self.rank} (pid {self.pid}) {self.where}"


def _read(path: Path) -> tuple[dict, list[str]] | None:
    try:
        head, _, rest = path.read_text(errors="replace").partition("\n")
        return json.loads(head), rest.splitlines()
    except (OSError, ValueError):
        return None


def dump_stacks(job_id: str, stacks_dirs: dict[str, Path], rank_hosts: dict[int, str],
                wait_s: float = WAIT_S) -> list[RankStack]:
    """Ask every live rank of the job for its stacks; the answers, by rank. `stacks_dirs`: host -> its
    stacks folder; `rank_hosts`: the plan's rank -> host (an MPI rank may write into the master's folder)."""
    live = set(job_processes(job_id))
    asked: dict[int, tuple[str, Path, int]] = {}
    for host, folder in stacks_dirs.items():
        for path in folder.glob("*.txt") if folder.is_dir() else ():
            if not path.stem.isdigit() or int(path.stem) not in live:
                continue  # exited (or not this job's): nothing to ask
            header = _read(path)
            if header is None:
                continue
            pid = int(path.stem)
            try:
                sizes = path.stat().st_size
                os.kill(pid, DUMP_SIGNAL)
            except (OSError, ProcessLookupError):
                continue
            rank = int(header[0].get("rank", -1))
            asked[pid] = (rank_hosts.get(rank, host), path, sizes)
    deadline = time.monotonic() + wait_s
    pending = dict(asked)
    while pending and time.monotonic() < deadline:
        for pid, (_, path, size) in list(pending.items()):
            try:
                grown = path.stat().st_size > size
                os.kill(pid, 0)
            except OSError:
                grown = True  # the file or the process is gone: nothing more will come
            if grown:
                pending.pop(pid)
        time.sleep(POLL_S)
    time.sleep(POLL_S)  # a dump is written in one go by the handler; let the last one finish
    found = []
    for pid, (host, path, size) in asked.items():
        read = _read(path)
        if read is None:
            continue
        header, lines = read
        lines = [ln for ln in lines if ln.strip()][:MAX_DUMP_LINES]
        found.append(RankStack(host, int(header.get("rank", -1)), pid, lines or ["(no answer: the process did not "
                                                                                  "dump its stacks in time)"]))
    return sorted(found, key=lambda s: (s.rank, s.pid))
