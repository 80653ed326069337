"""CloudWatch Logs reads on a real serve (serve/logs.py): a stream is found only by a name serve issued; a name that
walks out of the job's logs folder, or names a host the job does not have, is not found."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from smdist_launcher.backends.sagemaker.logs import LOG_GROUP

from .conftest import Served
from .test_serve import _request, _unique, _wait, code  # noqa: F401 - the code fixture

pytestmark = pytest.mark.timeout(300)


def test_only_the_streams_serve_issued_are_read(clients: dict[str, Any], code: str,  # noqa: F811
                                                serve_endpoint: Served,
                                                tmp_path: Path) -> None:
    sagemaker, logs = clients["sagemaker"], clients["logs"]
    name = _unique("served-logs")
    request = _request(code, name)
    request["ResourceConfig"]["InstanceCount"] = 1
    sagemaker.create_training_job(**request)
    assert _wait(sagemaker, name)["TrainingJobStatus"] == "Completed"
    streams = [s["logStreamName"] for s in logs.describe_log_streams(
        logGroupName=LOG_GROUP, logStreamNamePrefix=f"{name}/")["logStreams"]]
    assert len(streams) == 1 and streams[0].startswith(f"{name}/algo-1-")
    events = logs.get_log_events(logGroupName=LOG_GROUP, logStreamName=streams[0], startFromHead=True)["events"]
    assert any("hello from algo-1" in e["message"] for e in events)
    # a file outside the job, named as the old code built the path: <job dir>/logs/<host>.log
    secret = tmp_path / "secret.log"
    secret.write_text("SENTINEL outside the job\n")
    walk = os.path.relpath(tmp_path / "secret", serve_endpoint.jobs / name / "logs")
    epoch = streams[0].rsplit("-", 1)[1]
    for forged in (f"{name}/{walk}-{epoch}", f"{name}/{walk}-1", f"{name}/../../../../var/log/auth-1",
                   f"{name}/algo-2-{epoch}", f"{name}/algo-1-{int(epoch) + 1}", f"{name}/algo-1"):
        with pytest.raises(ClientError) as info:
            logs.get_log_events(logGroupName=LOG_GROUP, logStreamName=forged, startFromHead=True)
        assert info.value.response["Error"]["Code"] == "ResourceNotFoundException", (forged, info.value.response)
    assert not logs.describe_log_streams(logGroupName=LOG_GROUP, logStreamNamePrefix=f"{name}/..")["logStreams"]


class _OneJob:
    """The three questions LogStreams asks serve's job table, for one job with one host whose log is `log`."""

    def __init__(self, log: Path) -> None:
        self.log = log

    def hosts(self, name: str) -> list[str]:
        return ["algo-1"] if name == "big" else []

    def log_file(self, name: str, host: str) -> Path | None:
        return self.log if (name, host) == ("big", "algo-1") else None


def test_a_huge_host_log_is_paged_from_the_file_not_held_in_memory(tmp_path: Path) -> None:
    """256 MiB of log (sparse: one line of NULs between two short ones) read through GetLogEvents: memory stays a
    few pages, every event is at most CloudWatch's 256 KiB and every answer about its 1 MB, and paging reaches the
    last line. The old reader read the whole file, then kept every line."""
    import tracemalloc

    from smdist_launcher.serve.logs import LogStreams

    MAX_EVENT_BYTES, PAGE_BYTES = 2**18, 2**20  # CloudWatch: 256 KiB an event, 1 MB an answer

    log = tmp_path / "big" / "logs" / "algo-1.log"
    log.parent.mkdir(parents=True)
    with open(log, "wb") as f:
        f.write(b"first\n")
        f.seek(256 * 2**20)
        f.write(b"\nlast line\n")
    streams = LogStreams(_OneJob(log))  # type: ignore[arg-type]
    stream = streams._name("big", "algo-1")
    tracemalloc.start()
    try:
        page = streams.get_events({"logGroupName": LOG_GROUP, "logStreamName": stream, "startFromHead": True})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, peak
    assert page["events"][0]["message"] == "first"
    assert all(len(e["message"]) <= MAX_EVENT_BYTES for e in page["events"])
    assert sum(len(e["message"]) for e in page["events"]) <= PAGE_BYTES + MAX_EVENT_BYTES
    messages = 0
    for _ in range(2 * 256 * 2**20 // PAGE_BYTES):  # bounded: the pages of 256 MiB
        token = page["nextForwardToken"]
        page = streams.get_events({"logGroupName": LOG_GROUP, "logStreamName": stream, "nextToken": token})
        messages += len(page["events"])
        if page["nextForwardToken"] == token:
            break
    assert messages > 256 and page["events"] == [], messages
    previous = streams.get_events({"logGroupName": LOG_GROUP, "logStreamName": stream,
                                   "nextToken": page["nextBackwardToken"].replace("b/", "f/")})
    assert previous["events"] == []


def test_the_default_read_of_a_log_without_newlines_gives_its_last_pieces(tmp_path: Path) -> None:
    """GetLogEvents without startFromHead gives the LAST events. A log with no newline (a progress bar redrawn with
    carriage returns) is events of 256 KiB pieces: the default read gave the first pieces, counting only lines."""
    from smdist_launcher.serve.logs import LogStreams

    piece = 2**18
    log = tmp_path / "big" / "logs" / "algo-1.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"head\n" + b"".join(bytes([65 + i]) * piece for i in range(4)) + b"tail")  # A..D + a short one
    streams = LogStreams(_OneJob(log))  # type: ignore[arg-type]
    stream = streams._name("big", "algo-1")
    last = streams.get_events({"logGroupName": LOG_GROUP, "logStreamName": stream, "limit": 2})["events"]
    # the whole pieces are events (a last piece still short waits for its newline or its full size)
    assert [e["message"][:1] for e in last] == ["C", "D"] and all(len(e["message"]) == piece for e in last)
    first = streams.get_events({"logGroupName": LOG_GROUP, "logStreamName": stream, "limit": 2,
                                "startFromHead": True})["events"]
    assert [e["message"][:1] for e in first] == ["h", "A"]
    every = streams.get_events({"logGroupName": LOG_GROUP, "logStreamName": stream, "limit": 10})["events"]
    assert [e["message"][:1] for e in every] == ["h", "A", "B", "C", "D"]


def test_a_log_replaced_by_a_link_is_not_read(tmp_path: Path) -> None:
    from smdist_launcher.serve.logs import LogStreams
    from smdist_launcher.serve.protocol import ApiError

    secret = tmp_path / "secret"
    secret.write_text("SENTINEL outside the job\n")
    log = tmp_path / "big" / "logs" / "algo-1.log"
    log.parent.mkdir(parents=True)
    log.symlink_to(secret)
    streams = LogStreams(_OneJob(log))  # type: ignore[arg-type]
    with pytest.raises(ApiError) as info:
        streams.get_events({"logGroupName": LOG_GROUP, "logStreamName": streams._name("big", "algo-1")})
    assert info.value.code == "ResourceNotFoundException"


def test_cloudwatch_reading_order_and_time_bounds(tmp_path: Path) -> None:
    """As CloudWatch's GetLogEvents: without a token and startFromHead false (its default) the LAST `limit` events;
    with startFromHead the first; endTime is exclusive and 0 a bound like any other (nothing before epoch 0)."""
    from smdist_launcher.serve.logs import LogStreams

    log = tmp_path / "big" / "logs" / "algo-1.log"
    log.parent.mkdir(parents=True)
    log.write_text("".join(f"line {i}\n" for i in range(5)))
    streams = LogStreams(_OneJob(log))  # type: ignore[arg-type]
    ask = {"logGroupName": LOG_GROUP, "logStreamName": streams._name("big", "algo-1"), "limit": 2}

    def messages(**more: Any) -> list[str]:
        return [e["message"] for e in streams.get_events({**ask, **more})["events"]]

    assert messages(startFromHead=True) == ["line 0", "line 1"]
    assert messages(startFromHead=False) == ["line 3", "line 4"]
    assert messages() == ["line 3", "line 4"]
    assert messages(limit=10) == [f"line {i}" for i in range(5)]
    assert messages(endTime=0) == [] and messages(endTime=0, startFromHead=True) == []
    assert messages(endTime=2**62, startFromHead=True) == ["line 0", "line 1"]
    after = streams.get_events({**ask, "startFromHead": True})["nextForwardToken"]
    assert messages(nextToken=after) == ["line 2", "line 3"]  # a token reads forward from it
