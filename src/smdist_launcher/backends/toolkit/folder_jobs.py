"""describe / logs of a job kept in a job folder (job.json and logs/<host>.log): the part of the backend interface
that every backend running hosts from a job folder answers the same way (process, netns, docker, Slurm)."""
from __future__ import annotations

import codecs
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ...contract.no_follow import open_read_nofollow
from ..api import Emit, HostStatus, JobHandle, JobState, JobStatus
from .jobdir import JobDir
from .records import JobRecord

POLL_S = 0.2
LOG_CHUNK = 8 << 20  # the most of a log read into memory at once


def handle_of(record: JobRecord, backend: str | None = None) -> JobHandle:
    from ..registry import canonical

    return JobHandle(backend=canonical(backend or record.backend) or "process", job_name=record.job_name,
                     job_dir=record.job_dir or None, region=(record.backend_info or {}).get("region"))


def load_record(handle: JobHandle) -> JobRecord:
    if not handle.job_dir:
        raise ValueError(f"job {handle.job_name}: its handle names no job folder")
    return JobRecord.load(JobDir(Path(handle.job_dir)).record_file)


def status_of(record: JobRecord, backend: str) -> JobStatus:
    hosts = [HostStatus(name=name, exit_code=info.get("exit_code"),
                        detail={k: v for k, v in info.items() if k != "exit_code"})
             for name, info in (record.hosts or {}).items()]
    return JobStatus(job_name=record.job_name, backend=backend, state=JobState.of(record.status), phase=record.phase,
                     reason=record.failure_reason, model_data=record.model_data, created=record.created,
                     ended=record.ended, hosts=hosts, attempts=list(record.attempts),
                     stragglers=dict(record.backend_info.get("stragglers") or {}))


def write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def host_names(record: JobRecord) -> list[str]:
    return [h["name"] for h in (record.plan or {}).get("hosts", [])]


def check_hosts(record: JobRecord, wanted: list[str] | None) -> list[str]:
    """The hosts to show: all, or the ones asked for (ValueError naming the job's hosts for an unknown one)."""
    names = host_names(record)
    if not wanted:
        return names
    unknown = [h for h in wanted if h not in names]
    if unknown:
        raise ValueError(f"--host: {', '.join(unknown)} not in job {record.job_name} (hosts: {', '.join(names)})")
    return list(wanted)


def follow_log_files(record: JobRecord, hosts: list[str] | None, follow: bool, emit: Emit | None,
                     refresh: Callable[[], JobRecord]) -> None:
    """The hosts' saved output; follow: new lines as the hosts write them, until the job has ended (`refresh`
    gives the record as its backend sees it now, e.g. a Slurm job that Slurm ended itself)."""
    out = emit or write_stdout
    job_dir = JobDir(Path(record.job_dir))
    # Relative to the job folder, opened without following a link (a job's code may own files of its folder: a
    # planted logs/<host>.log -> /etc/shadow must not be shown by a launcher that runs with more privilege).
    files = {h: job_dir.log_file(h).relative_to(job_dir.root) for h in check_hosts(record, hosts)}
    # A log is read LOG_CHUNK at a time, whatever its size (a job may print gigabytes).
    if not follow:
        for path in files.values():
            offset, decoder = 0, codecs.getincrementaldecoder("utf-8")("replace")
            while data := _read_log(job_dir.root, path, offset):
                offset += len(data)
                out(decoder.decode(data))
            if last := decoder.decode(b"", final=True):
                out(last)
        return
    offsets = dict.fromkeys(files, 0)
    partial = dict.fromkeys(files, b"")
    while True:
        now = refresh()  # read BEFORE the last pass, so nothing written before the end is missed
        ended = JobState.of(now.status).is_terminal or now.launcher_gone()
        got = more = False
        for h, path in files.items():
            data = _read_log(job_dir.root, path, offsets[h])
            if data is None:
                continue
            if data:
                got = True
                more = more or len(data) == LOG_CHUNK
                offsets[h] += len(data)
                data = partial[h] + data
                complete, _, partial[h] = data.rpartition(b"\n")
                if complete:
                    out((complete + b"\n").decode("utf-8", "replace"))
                if len(partial[h]) >= LOG_CHUNK:  # a line without end: shown as it comes, not held whole
                    out(partial[h].decode("utf-8", "replace"))
                    partial[h] = b""
        if more:
            continue  # more is there already: no pause
        if ended and not got:
            for rest in partial.values():
                if rest:
                    out((rest + b"\n").decode("utf-8", "replace"))
            if now.launcher_gone() or now.status == JobState.INTERRUPTED:
                sys.stderr.write(f"job {now.job_name}: its launcher (pid {now.launcher_pid}) is gone without a final "
                                 "status (Interrupted): no more output will come\n")
            return
        time.sleep(POLL_S)


def _read_log(job_root: Path, relative: Path, offset: int = 0) -> bytes | None:
    """At most LOG_CHUNK bytes of a host's log from `offset`; None when it does not exist or is not a regular file
    of the job folder (a link, a FIFO)."""
    try:
        with open_read_nofollow(job_root, relative) as f:
            f.seek(offset)
            return f.read(LOG_CHUNK)
    except OSError:
        return None
