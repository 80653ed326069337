"""Follow a training job's CloudWatch log streams (/aws/sagemaker/TrainingJobs, one stream per host)."""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
# stream names are "<job>/algo-<n>-<epoch seconds>"
_STREAM_HOST = re.compile(r"^(?P<host>.+?)-\d+$")


def host_of(stream: str) -> str:
    tail = stream.split("/", 1)[-1]
    match = _STREAM_HOST.fullmatch(tail)
    return match.group("host") if match else tail


class LogTail:
    """Each `poll()` emits the lines that arrived since the last one, `[algo-1] message`, per stream in name order."""

    def __init__(self, logs: Any, job_name: str, emit: Callable[[str], None]) -> None:
        self._logs = logs
        self._prefix = f"{job_name}/"
        self._emit = emit
        self._tokens: dict[str, str | None] = {}

    def _streams(self) -> list[str]:
        names: list[str] = []
        kwargs: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamNamePrefix": self._prefix}
        try:
            while True:
                page = self._logs.describe_log_streams(**kwargs)
                names += [s["logStreamName"] for s in page.get("logStreams", [])]
                if not page.get("nextToken"):
                    return sorted(names)
                kwargs["nextToken"] = page["nextToken"]
        except self._logs.exceptions.ResourceNotFoundException:
            return []  # the log group appears with the first host's output

    def _drain(self, stream: str) -> int:
        count = 0
        while True:
            kwargs: dict[str, Any] = {"logGroupName": LOG_GROUP, "logStreamName": stream, "startFromHead": True}
            if self._tokens.get(stream):
                kwargs["nextToken"] = self._tokens[stream]
            page = self._logs.get_log_events(**kwargs)
            events = page.get("events", [])
            host = host_of(stream)
            for event in events:
                self._emit(f"[{host}] {event['message'].rstrip()}")
            count += len(events)
            token = page.get("nextForwardToken")
            done = not events or token is None or token == self._tokens.get(stream)
            if token is not None:
                self._tokens[stream] = token
            if done:  # no events or the same token back: nothing more for now
                return count

    def poll(self) -> int:
        """Emit new lines of every stream; the number emitted."""
        return sum(self._drain(stream) for stream in self._streams())
