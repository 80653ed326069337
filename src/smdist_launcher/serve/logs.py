"""CloudWatch Logs reads for training jobs: one stream per host, `<job>/<host>-<epoch>`, from the host's log file.
A stream is found by the names serve issued (the job's hosts from its plan), never from a path in the request.

Each line gets a timestamp when the endpoint first reads it, and keeps it, so startTime / token paging is stable; a
token is a byte offset in the host's log, and a page is read from the file on demand (a 1 GiB log is never held in
memory: serve keeps one (offset, time) mark per read that found new lines)."""
from __future__ import annotations

import bisect
import itertools
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..contract.no_follow import open_read_nofollow
from .jobs import Jobs
from .protocol import ApiError

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
PAGE = 1000
PAGE_BYTES = 2**20        # of messages in one answer, as CloudWatch's 1 MB
MAX_EVENT_BYTES = 2**18   # CloudWatch's largest event (256 KiB): a longer line is split


def _raw(line: str, host: str) -> str:
    """The line as the process wrote it: local mode's `[algo-1 r0] ` prefix is the reader's job (CloudWatch has
    none)."""
    if line.startswith(f"[{host}") and "] " in line:
        return line.split("] ", 1)[1]
    return line


@dataclass
class _Stream:
    """What serve keeps of a host's log: where its complete events end, and when each stretch of it was first read.
    The lines themselves stay in the file: a page is read from it on demand, so memory does not grow with the log."""

    end: int = 0                                   # bytes of the file that form complete events
    marks: list[tuple[int, int]] = field(default_factory=list)  # (offset, ms): events from offset on first seen then
    lock: threading.Lock = field(default_factory=threading.Lock)

    def stamp(self, offset: int) -> int:
        """The timestamp of the event at `offset`."""
        at = bisect.bisect_right(self.marks, (offset, 2**63)) - 1
        return self.marks[at][1] if at >= 0 else 0

    def offset_since(self, ms: int) -> int:
        """The offset of the first event stamped `ms` or later (`end` when none)."""
        at = bisect.bisect_left(self.marks, ms, key=lambda mark: mark[1])
        return self.marks[at][0] if at < len(self.marks) else self.end


def _newlines_backwards(f: BinaryIO, start: int, stop: int) -> Iterator[int]:
    """The offsets of the newlines in bytes start..stop of `f`, the last first: read backwards in chunks, memory
    bounded whatever the size."""
    position = stop
    while position > start:
        chunk_start = max(start, position - 2**16)
        f.seek(chunk_start)
        chunk = f.read(position - chunk_start)
        at = len(chunk)
        while (at := chunk.rfind(b"\n", 0, at)) >= 0:
            yield chunk_start + at
        position = chunk_start


def _complete_end(f: BinaryIO, start: int, size: int) -> int:
    """Where the complete events of bytes start..size end: after the last whole MAX_EVENT_BYTES piece of the
    unterminated line that follows the last newline (none: the newline ends them)."""
    if size <= start:  # nothing new (or the file was truncated: what was served stays as it was)
        return start
    last = next(_newlines_backwards(f, start, size), None)
    line_start = start if last is None else last + 1
    return line_start + (size - line_start) // MAX_EVENT_BYTES * MAX_EVENT_BYTES


def _tail_start(f: BinaryIO, start: int, stop: int, limit: int) -> int:
    """The offset of the first of the last `limit` events in start..stop (which ends after a newline or a whole
    MAX_EVENT_BYTES piece). An event is a line, or a piece of a longer one as _page reads it: from the line's
    start, MAX_EVENT_BYTES at a time (a log without newlines, a progress bar's carriage returns, is all pieces)."""
    found, end = 0, stop
    # the byte before `stop` ends the last line: not a boundary to count; start - 1 closes the first line
    for newline in itertools.chain(_newlines_backwards(f, start, stop - 1), (start - 1,)):
        line_start = newline + 1
        pieces = max(1, -(-(end - line_start) // MAX_EVENT_BYTES))
        if found + pieces >= limit:
            return line_start + (pieces - (limit - found)) * MAX_EVENT_BYTES
        found, end = found + pieces, line_start
    return start


def _page(f: BinaryIO, host: str, start: int, stop: int, stream: _Stream,
          limit: int) -> tuple[list[dict[str, Any]], int]:
    """Up to `limit` events (and PAGE_BYTES of messages) from offset `start` up to `stop` of the host's log `f`, and
    the offset after them."""
    events: list[dict[str, Any]] = []
    size = 0
    f.seek(start)
    while start < stop and len(events) < limit and size < PAGE_BYTES:
        line = f.readline(min(MAX_EVENT_BYTES, stop - start))
        if not line:
            break
        stamp = stream.stamp(start)
        start += len(line)
        size += len(line)
        message = _raw(line.rstrip(b"\n").decode("utf-8", "replace"), host)
        events.append({"timestamp": stamp, "message": message, "ingestionTime": stamp})
    return events, start


class LogStreams:
    def __init__(self, jobs: Jobs) -> None:
        self._jobs = jobs
        self._streams: dict[tuple[str, str], _Stream] = {}
        self._created: dict[str, int] = {}
        self._lock = threading.Lock()

    def _name(self, job: str, host: str) -> str:
        epoch = self._created.setdefault(job, int(time.time()))
        return f"{job}/{host}-{epoch}"

    def _issued(self, stream_name: str) -> tuple[str, str] | None:
        """(job, host) of a stream name serve gave out (a job's host from its plan, the job's epoch), else None:
        nothing of the requested name is ever joined into a path."""
        job = stream_name.partition("/")[0]
        for host in self._jobs.hosts(job):
            if self._name(job, host) == stream_name:
                return job, host
        return None

    def _open_log(self, job: str, host: str) -> BinaryIO | None:
        """The host's log (<job>/logs/<host>.log), opened without following a link or opening a FIFO or device; None
        when there is none (not there yet, or not a plain file)."""
        path = self._jobs.log_file(job, host)
        if path is None:
            return None
        try:
            return open_read_nofollow(path.parent.parent, Path(path.parent.name, path.name))
        except OSError:
            return None

    def _refresh(self, job: str, host: str, f: BinaryIO) -> _Stream:
        """The stream, its complete events brought up to the end of its open log `f` (the new ones stamped now)."""
        with self._lock:
            stream = self._streams.setdefault((job, host), _Stream())
        with stream.lock:
            end = _complete_end(f, stream.end, os.fstat(f.fileno()).st_size)
            if end > stream.end:
                now = max(int(time.time() * 1000), stream.marks[-1][1] if stream.marks else 0)  # sorted for bisect
                stream.marks.append((stream.end, now))
                stream.end = end
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
                f = self._open_log(served.name, host)
                if f is None:
                    continue
                with f:
                    stream = self._refresh(served.name, host, f)
                name = self._name(served.name, host)
                if name.startswith(prefix):
                    last = stream.marks[-1][1] if stream.marks else int(served.created * 1000)
                    out.append({"logStreamName": name, "creationTime": int(served.created * 1000),
                                "firstEventTimestamp": stream.marks[0][1] if stream.marks else last,
                                "lastEventTimestamp": last, "lastIngestionTime": last, "storedBytes": 0})
        out.sort(key=lambda s: str(s["logStreamName"]), reverse=bool(params.get("descending")))
        return {"logStreams": out[: int(params.get("limit") or 50)]}

    def get_events(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("logGroupName") != LOG_GROUP:
            raise ApiError("ResourceNotFoundException", "The specified log group does not exist.")
        issued = self._issued(params["logStreamName"])
        f = self._open_log(*issued) if issued is not None else None
        if issued is None or f is None:
            raise ApiError("ResourceNotFoundException", "The specified log stream does not exist.")
        with f:  # one open file for the whole request: the stream brought up to date, the page read from it
            stream = self._refresh(*issued, f)
            start, stop, limit = _range(params, stream)
            if not params.get("nextToken") and not params.get("startFromHead"):
                # CloudWatch's default (startFromHead false, no token): the LAST `limit` events of the range
                start = _tail_start(f, start, stop, limit)
            events, end = _page(f, issued[1], start, stop, stream, limit)
        return {"events": events, "nextForwardToken": f"f/{end:056d}", "nextBackwardToken": f"b/{start:056d}"}


def _range(params: dict[str, Any], stream: _Stream) -> tuple[int, int, int]:
    """A GetLogEvents request's (start, stop, limit): its token, startTime and endTime as offsets of the stream."""
    start = 0
    token = params.get("nextToken")
    if token:
        try:
            start = int(token.split("/", 1)[1])
        except (IndexError, ValueError):
            raise ApiError("InvalidParameterException", "The specified nextToken is invalid.") from None
        if not 0 <= start <= stream.end:
            raise ApiError("InvalidParameterException", "The specified nextToken is invalid.")
    since = params.get("startTime")
    if since is not None:
        start = max(start, stream.offset_since(since))
    # endTime is exclusive and 0 a valid bound (is not None: no event is stamped before epoch 0)
    until = params.get("endTime")
    stop = stream.end if until is None else max(start, min(stream.end, stream.offset_since(until)))
    return start, stop, min(max(int(params.get("limit") or PAGE), 1), PAGE)
