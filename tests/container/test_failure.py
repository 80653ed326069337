import json
import os
import socket

import pytest

from smdist_launcher.container.failure import (
    FailureTracker,
    exception_of,
    failure_text,
    is_timeout,
    write_failure,
    write_success,
)

TORCHRUN_SUMMARY = [
    "E1122 11:13:14.364000 7055 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) "
    "local_rank: 1 (pid: 7059) of binary: /usr/bin/python",
]
MPI_SUMMARY = ["mpirun detected that one or more processes exited with non-zero status, thus causing",
               "  Process name: [[19063,1],3]", "  Exit code:    1"]


def test_first_traceback_wins_over_later_victims():
    t = FailureTracker("algo-1", [0, 1], {0: "algo-1", 1: "algo-1", 2: "algo-2", 3: "algo-2"})
    t.observe(1, "Traceback (most recent call last):", 200)
    t.observe(1, "RuntimeError: Connection closed by peer", 201)
    t.observe(3, "Traceback (most recent call last):", 100)
    t.observe(3, "ValueError: boom", 101)
    for line in MPI_SUMMARY:
        t.observe(None, line, 300)
    d = t.diagnosis(1, ["mpirun"])
    assert (d["rank"], d["host"], d["reported_by"], d["exit_code"], d["time"]) == (3, "algo-2", "algo-1", 1, 100)
    assert d["traceback"] == ["Traceback (most recent call last):", "ValueError: boom"]
    assert d["likely_victim"] is False


def test_torchrun_sigkill_maps_local_to_global_rank():
    t = FailureTracker("algo-2", [2, 3])
    for line in TORCHRUN_SUMMARY:
        t.observe(None, line, 50)
    d = t.diagnosis(1, ["torchrun"])
    assert (d["rank"], d["exit_code"], d["signal"]) == (3, -9, "SIGKILL")


def test_a_killed_rank_only_in_torchruns_summary_wins_over_the_victim_torchrun_logged():
    # torchrun logs "failed (exitcode ...)" for one failed rank only, here the victim (its peer was SIGKILLed while
    # it waited in all_reduce); the summary it prints last lists the killed rank too (seen in CI, 2026-11-25)
    t = FailureTracker("algo-2", [2, 3])
    t.observe(2, "[rank2]: Traceback (most recent call last):", 100)
    t.observe(2, "[rank2]: RuntimeError: [pair.cc:537] Read error [127.0.0.1]:942: Connection reset by peer.", 101)
    t.observe(None, "E1125 15:30:01.000000 1 api.py:1002] failed (exitcode: 1) local_rank: 0 (pid: 7) of binary: "
                    "/usr/bin/python", 110)
    for line in ["Failures:", "[1]:", "  host      : algo-2", "  rank      : 3 (local_rank: 1)",
                 "  exitcode  : -9 (pid: 8)  (SIGKILL)", "  error_file: <N/A>", "Root Cause (first observed failure):",
                 "[0]:", "  rank      : 2 (local_rank: 0)", "  exitcode  : 1 (pid: 7)"]:
        t.observe(None, line, 120)
    d = t.diagnosis(1, ["torchrun"])
    assert (d["rank"], d["exit_code"], d["signal"], d["likely_victim"]) == (3, -9, "SIGKILL", False)


def test_mpi_signal_line():
    t = FailureTracker("algo-1")
    t.observe(None, "mpirun noticed that process rank 2 with PID 0 on node algo-2 exited on signal 9 (Killed).", 7)
    d = t.diagnosis(137, [])
    assert (d["rank"], d["signal"], d["exit_code"]) == (2, "SIGKILL", 137)


def test_victim_only_host():
    t = FailureTracker("algo-1", [0])
    t.observe(0, "Traceback (most recent call last):", 1)
    t.observe(0, "RuntimeError: [pair.cc:553] Connection closed by peer [127.0.0.1]:1", 2)
    d = t.diagnosis(1, [], default_rank=0)
    assert d["rank"] == 0 and d["likely_victim"] is True


def test_files(tmp_path):
    out = tmp_path / "output"
    d = {"host": "algo-2", "rank": 3, "exit_code": 1, "signal": None, "time": 5, "traceback": ["E: x"],
         "likely_victim": False, "command": ["python", "t.py"]}
    write_failure(out, d)
    assert json.loads((out / "failure.json").read_text())["rank"] == 3
    assert (out / "failure").read_text() == failure_text(d)
    assert "host algo-2, rank 3 failed first with exit code 1" in failure_text(d)
    # a reason the user script wrote is kept
    (out / "failure").write_text("my own reason")
    write_failure(out, d)
    assert (out / "failure").read_text() == "my own reason"
    write_success(out)
    assert (out / "success").exists()


def test_a_victim_read_first_still_loses_to_the_cause():
    t = FailureTracker("algo-2", [2, 3])
    t.observe(2, "Traceback (most recent call last):", 10)
    t.observe(2, "RuntimeError: Connection closed by peer [127.0.0.1]:5", 11)
    t.observe(3, "Traceback (most recent call last):", 12)
    t.observe(3, "ValueError: boom", 13)
    for line in ("failed (exitcode: 1) local_rank: 0 (pid: 1)", "failed (exitcode: 1) local_rank: 1 (pid: 2)"):
        t.observe(None, line, 14)
    d = t.diagnosis(1, [])
    assert (d["rank"], d["likely_victim"], d["time"]) == (3, False, 12)


def test_a_plain_ddp_script_under_mpirun_gets_a_hint():
    t = FailureTracker("algo-1", [0, 1])
    t.observe(0, "Traceback (most recent call last):", 10)
    t.observe(0, "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable "
                 "RANK expected, but not set", 11)
    d = t.diagnosis(1, ["mpirun"])
    assert "use torch_distributed, or copy those into RANK, WORLD_SIZE and LOCAL_RANK" in d["hint"]
    assert "\nHint: torch's env:// rendezvous needs RANK" in failure_text(d)
    t = FailureTracker("algo-1", [0])
    t.observe(0, "Traceback (most recent call last):", 10)
    t.observe(0, "ValueError: boom", 11)
    assert t.diagnosis(1, ["python"])["hint"] is None and "Hint" not in failure_text(t.diagnosis(1, ["python"]))


def _raised(make) -> list[str]:
    """The traceback lines of what `make()` raises, as a rank prints them."""
    import traceback

    try:
        make()
    except BaseException as exc:  # noqa: BLE001
        return "".join(traceback.format_exception(exc)).splitlines()
    raise AssertionError("nothing raised")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accept_nobody() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        s.settimeout(0.01)
        s.accept()


def test_real_timeouts_are_timeouts_by_their_class_and_form():
    """Real errors: a TCPStore whose second client never comes, a key never set, a socket's own timeout."""
    from datetime import timedelta

    import torch.distributed as dist

    no_clients = _raised(lambda: dist.TCPStore("127.0.0.1", _free_port(), 2, True, timedelta(seconds=1)))
    store = dist.TCPStore("127.0.0.1", _free_port(), 1, True, timedelta(seconds=5))
    no_key = _raised(lambda: store.wait(["never"], timedelta(milliseconds=50)))
    for lines in (no_clients, no_key):
        found = exception_of(lines)
        assert found is not None and found[0].endswith("DistStoreError") and is_timeout(lines), lines[-1]
    accept = _raised(_accept_nobody)
    assert exception_of(accept) == ("TimeoutError", "timed out") and is_timeout(accept)


WATCHDOG = ("[rank1]:[E1122 11:13:14.364000 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=668, OpType=ALLREDUCE, NumelIn=52, NumelOut=52, Timeout(ms)=600000) ran for "
            "600097 milliseconds before timing out.")


@pytest.mark.parametrize(("lines", "timeout"), [
    (["Traceback (most recent call last):", "TimeoutError: [Errno 110] Connection timed out"], True),
    (["socket.timeout: timed out"], True),
    (["torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"], True),
    ([WATCHDOG, "Fatal Python error: Aborted"], True),
    (["[rank0]: torch.distributed.DistNetworkError: The client socket has timed out after 60000ms while trying to "
      "connect to (10.0.0.1, 29500)."], True),
    # the word alone is no timeout: the script's own errors, a peer that went away
    (["ValueError: timeout must be positive, got -1"], False),
    (["KeyError: 'timeout'"], False),
    (["RuntimeError: the data loader timed out"], False),
    (["torch.distributed.DistNetworkError: Connection reset by peer"], False),
    (["torch.distributed.DistStoreError: timeout in my own words"], False),
    ([], False),
])
def test_timeouts_are_recognised_by_exception_class_not_by_a_word(lines, timeout):
    assert is_timeout(lines) is timeout


def test_a_script_that_filled_the_disk_still_leaves_failure_json(tmp_path):
    """The script filled the disk: failure.json still lands, written over the room the runtime took at start,
    compacted to fit (the stacks of ranks still running left out), with `disk_full` saying why; no `failure` half
    written, no temp file (before: ENOSPC, no failure.json: the launcher took the host for a lost one and retried)."""
    from backends.toolkit.small_disk import on_small_disk

    found = on_small_disk(tmp_path, '''
from smdist_launcher.container import failure_reserve
from smdist_launcher.container.failure import write_failure
out = disk / "output"
assert failure_reserve.take(out)
fill()
d = {"host": "algo-1", "rank": 0, "exit_code": 1, "signal": None, "time": 5, "likely_victim": False,
     "command": ["python", "train.py"], "still_running": [{"dump": ["x" * 1000] * 100}],
     "traceback": ["Traceback (most recent call last):"] + ["  frame " + "y" * 300] * 200
                  + ["OSError: [Errno 28] No space left on device"]}
write_failure(out, d)
got = json.loads((out / "failure.json").read_text())
print(json.dumps({"rank": got["rank"], "disk_full": got["disk_full"], "last": got["traceback"][-1],
                  "stacks": "still_running" in got, "files": sorted(p.name for p in out.iterdir())}))
''')
    assert found == {"rank": 0, "disk_full": "failure.json could not be written: [Errno 28] No space left on device",
                     "last": "OSError: [Errno 28] No space left on device", "stacks": False,
                     "files": ["failure.json"]}


def test_the_failure_reserve_is_never_written_through_what_the_job_planted_there(tmp_path):
    """The job replaced the reserve by a link to a file outside, a FIFO or a hard link: none is written (no wait on a
    FIFO), the target stays as it was, and with no room left the write fails rather than writing elsewhere."""
    from backends.toolkit.small_disk import on_small_disk

    found = on_small_disk(tmp_path, '''
from smdist_launcher.container import failure_reserve
from smdist_launcher.container.failure import write_failure
outside = disk / "outside.txt"
outside.write_text("precious" * 2048)
results = {}
for kind in ("link", "fifo", "hardlink"):
    out = disk / kind / "output"
    out.parent.mkdir()
    assert failure_reserve.take(out)
    reserve = out / failure_reserve.RESERVE_NAME
    reserve.unlink()
    if kind == "link":
        reserve.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(reserve)
    else:
        os.link(outside, reserve)
    results[kind] = out
fill()
d = {"host": "algo-1", "rank": 0, "exit_code": 1, "signal": None, "time": 5, "traceback": ["E"], "command": []}
errors = {}
for kind, out in results.items():
    try:
        write_failure(out, d)
        errors[kind] = None
    except OSError as exc:
        errors[kind] = exc.strerror
    errors[kind + "-json"] = (out / "failure.json").exists()
print(json.dumps({"errors": errors, "outside": outside.read_text() == "precious" * 2048}))
''')
    assert found == {"errors": {"link": "No space left on device", "link-json": False,
                                "fifo": "No space left on device", "fifo-json": False,
                                "hardlink": "No space left on device", "hardlink-json": False},
                     "outside": True}


def test_success_is_never_written_through_a_link_the_job_planted(tmp_path):
    """The job planted output/success as a link to a file outside its tree (dangling: /etc/nologin, say): the runtime
    (root) must not create or touch that file (before: Path.touch followed the link and created it)."""
    out = tmp_path / "opt_ml" / "output"
    out.mkdir(parents=True)
    target = tmp_path / "outside" / "nologin"
    target.parent.mkdir()
    (out / "success").symlink_to(target)
    existing = tmp_path / "outside" / "kept"
    existing.write_text("x")
    old = existing.stat().st_mtime_ns - 10**9
    os.utime(existing, ns=(old, old))
    write_success(out)
    assert not target.exists()
    assert (out / "success").is_file() and not (out / "success").is_symlink()
    (out / "success").unlink()
    (out / "success").symlink_to(existing)
    write_success(out)
    assert existing.stat().st_mtime_ns == old
    assert not (out / "success").is_symlink()


def test_a_reserve_written_short_is_no_reserve(tmp_path, monkeypatch):
    """write() on a nearly full disk writes what fits and says how much (no error): take() must write the rest (then
    fail with ENOSPC, leaving no half reserve) rather than answer True for a reserve too small to be filled (before:
    True, a file of 8 KiB, and fill() refused it: the host then looked lost)."""
    import errno as _errno

    from smdist_launcher.container import failure_reserve

    real_write = os.write
    calls = []

    def short(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, data[:len(data) // 2])
        raise OSError(_errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(failure_reserve.os, "write", short)
    out = tmp_path / "opt_ml" / "output"
    out.mkdir(parents=True)
    assert failure_reserve.take(out) is False and calls
    assert not (out / failure_reserve.RESERVE_NAME).exists()
    calls.clear()
    monkeypatch.setattr(failure_reserve.os, "write", lambda fd, data: real_write(fd, data[:1000]))
    assert failure_reserve.take(out) is True
    assert (out / failure_reserve.RESERVE_NAME).stat().st_size == failure_reserve.RESERVE_BYTES
