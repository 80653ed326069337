"""CloudWatch Logs reads for training jobs: one stream per host, `<job>/<host>-<epoch>`, from the host's log file.

Each line gets a timestamp when the endpoint first reads it, and keeps it, so startTime / token paging is stable."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .jobs import Jobs
from .protocol import ApiError

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
PAGE = 1000


def _raw(line: str, host: str) -> str:
    """The line as the process wrote it: local mode's `[algo-1 r0] ` prefix is the reader's job (CloudWatch has
    none)."""
    if line.startswith(f"[{host}") and "] " in line:
        return line.split("] ", 1)[1]
    return line


@dataclass
class _Stream:
    events: list[tuple[int, str]] = field(default_factory=list)
    offset: int = 0          # bytes of the file already turned into events
    partial: bytes = b""


class LogStreams:
    def __init__(self, jobs: Jobs) -> None:
        self._jobs = jobs
        self._streams: dict[tuple[str, str], _Stream] = {}
        self._created: dict[str, int] = {}
        self._lock = threading.Lock()

    def _name(self, job: str, host: str) -> str:
        epoch = self._created.setdefault(job, int(time.time()))
        return f"{job}/{host}-{epoch}"

    def _read(self, job: str, host: str) -> _Stream | None:
        path = self._jobs.log_file(job, host)
        if path is None or not path.is_file():
            return None
        with self._lock:
            stream = self._streams.setdefault((job, host), _Stream())
            with open(path, "rb") as f:
                f.seek(stream.offset)
                data = f.read()
            stream.offset += len(data)
            complete, _, stream.partial = (stream.partial + data).rpartition(b"\n")
            now = int(time.time() * 1000)
            if complete:
                stream.events += [(now, _raw(line.decode("utf-8", "replace"), host)) for line in complete.split(b"\n")]
            return stream

    def describe_streams(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("logGroupName") != LOG_GROUP:
            raise ApiError("ResourceNotFoundException", "The specified log group does not exist.")
        prefix = params.get("logStreamNamePrefix") or ""
        out = []
        for served in self._jobs.all():
            if not f"{served.name}/".startswith(prefix[: len(served.name) + 1]) and not prefix.startswith(served.name):
                continue
            for host in self._jobs.hosts(served.name):
                stream = self._read(served.name, host)
                if stream is None:
                    continue
                name = self._name(served.name, host)
                if name.startswith(prefix):
                    last = stream.events[-1][0] if stream.events else int(served.created * 1000)
                    out.append({"logStreamName": name, "creationTime": int(served.created * 1000),
                                "firstEventTimestamp": stream.events[0][0] if stream.events else last,
                                "lastEventTimestamp": last, "lastIngestionTime": last, "storedBytes": 0})
        out.sort(key=lambda s: str(s["logStreamName"]), reverse=bool(params.get("descending")))
        return {"logStreams": out[: int(params.get("limit") or 50)]}

    def get_events(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("logGroupName") != LOG_GROUP:
            raise ApiError("ResourceNotFoundException", "The specified log group does not exist.")
        job, _, tail = params["logStreamName"].partition("/")
        host = tail.rsplit("-", 1)[0]
        stream = self._read(job, host)
        if stream is None:
            raise ApiError("ResourceNotFoundException", "The specified log stream does not exist.")
        start = 0
        token = params.get("nextToken")
        if token:
            try:
                start = int(token.split("/", 1)[1])
            except (IndexError, ValueError):
                raise ApiError("InvalidParameterException", "The specified nextToken is invalid.") from None
        events = stream.events
        since = params.get("startTime")
        while start < len(events) and since is not None and events[start][0] < since:
            start += 1
        page = events[start: start + int(params.get("limit") or PAGE)]
        end = start + len(page)
        return {"events": [{"timestamp": ts, "message": msg, "ingestionTime": ts} for ts, msg in page],
                "nextForwardToken": f"f/{end:056d}", "nextBackwardToken": f"b/{start:056d}"}
