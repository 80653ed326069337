"""Ask a job's ranks where they are stuck: each rank registered a faulthandler dump on SIGUSR2 into
<stacks dir>/<pid>.txt at start-up (compat sitecustomize: a JSON header line, then the dumps). Used by the
local launcher before it stops a hung job, and by a host's runtime when SageMaker stops it (StopTrainingJob,
max_run): the SIGTERM reaches the runtime first there, so its ranks can still answer. Stdlib only."""
from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# "0": the launcher asks the ranks itself before it stops a job (local mode), so a stopped runtime does not
STACKS_ON_STOP_ENV = "SMDIST_STACKS_ON_STOP"
DUMP_SIGNAL = signal.SIGUSR2
WAIT_S = 15.0  # returns as soon as every rank answered; a loaded machine can take seconds to schedule one
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
        """The innermost frame of the main thread (the one whose outermost frame is <module>): "in f (train.py:12)"."""
        threads: list[list[re.Match[str]]] = []
        for line in self.dump:
            if line.startswith(("Thread ", "Current thread ")):
                threads.append([])
            elif (m := _FRAME.match(line)) and threads:
                threads[-1].append(m)
        frames = next((t for t in threads if t and t[-1]["func"] == "<module>"), None) or next(
            (t for t in threads if t), None)
        if not frames:
            return "(no Python frame in its dump)"
        top = frames[0]
        return f"in {top['func']} ({os.path.basename(top['file'])}:{top['line']})"

    def describe(self) -> str:
        return f"host {self.host}, rank {self.rank} (pid {self.pid}) {self.where}"

    def to_dict(self) -> dict[str, object]:
        return {"host": self.host, "rank": self.rank, "pid": self.pid, "where": self.where, "dump": self.dump}


def _read(path: Path) -> tuple[dict, list[str]] | None:
    try:
        head, _, rest = path.read_text(errors="replace").partition("\n")
        return json.loads(head), rest.splitlines()
    except (OSError, ValueError):
        return None


def dump_stacks(folders: dict[str, Path], live: Iterable[int], rank_hosts: dict[int, str] | None = None,
                wait_s: float = WAIT_S) -> list[RankStack]:
    """Signal every live registered rank in `folders` (host -> stacks folder) that has not dumped yet, wait up to
    `wait_s` for the answers, and return them by rank. `rank_hosts` (the plan's rank -> host) names the host of an
    MPI rank whose file lies in the master's folder."""
    live = set(live)
    asked: dict[int, tuple[str, Path, int]] = {}
    for host, folder in folders.items():
        for path in folder.glob("*.txt") if folder.is_dir() else ():
            if not path.stem.isdigit() or int(path.stem) not in live:
                continue  # exited (or not this job's): nothing to ask
            read = _read(path)
            if read is None or any(line.strip() for line in read[1]):
                continue  # unreadable, or already dumped (asked before us)
            pid, rank = int(path.stem), int(read[0].get("rank", -1))
            try:
                size = path.stat().st_size
                os.kill(pid, DUMP_SIGNAL)
            except OSError:
                continue
            asked[pid] = ((rank_hosts or {}).get(rank, host), path, size)
    deadline = time.monotonic() + wait_s
    pending = dict(asked)
    while pending and time.monotonic() < deadline:
        for pid, (_, path, size) in list(pending.items()):
            try:
                answered = path.stat().st_size > size
                os.kill(pid, 0)
            except OSError:
                answered = True  # the file or the process is gone: nothing more will come
            if answered:
                pending.pop(pid)
        time.sleep(POLL_S)
    time.sleep(POLL_S)  # a dump is written in one go by the handler; let the last one finish
    found = []
    for pid, (host, path, _) in asked.items():
        read = _read(path)
        if read is None:
            continue
        header, lines = read
        lines = [ln for ln in lines if ln.strip()][:MAX_DUMP_LINES]
        found.append(RankStack(host, int(header.get("rank", -1)), pid,
                               lines or ["(no answer: the process did not dump its stacks in time)"]))
    return sorted(found, key=lambda s: (s.rank, s.pid))


def rank_pids(folders: Iterable[Path]) -> dict[int, int]:
    """rank -> pid of every rank registered in these stacks folders (fault rehearsal picks its rank here)."""
    found: dict[int, int] = {}
    for folder in folders:
        for path in folder.glob("*.txt") if folder.is_dir() else ():
            read = _read(path) if path.stem.isdigit() else None
            if read is not None and isinstance(read[0].get("rank"), int):
                found[read[0]["rank"]] = int(path.stem)
    return found


def live_pids(proc: Path = Path("/proc")) -> list[int]:
    """Every process of this machine (a container holds only its job's)."""
    return [int(p.name) for p in proc.iterdir() if p.name.isdigit()]
