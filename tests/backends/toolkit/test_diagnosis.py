from __future__ import annotations

import json

import pytest

from smdist_launcher.backends.toolkit.diagnosis import describe_failure, failure_cause, first_failure
from smdist_launcher.backends.toolkit.restart_policy import Cause
from smdist_launcher.backends.toolkit.supervisor import HostExit


def test_first_real_failure_beats_earlier_victims_and_our_sigterms():
    victim = {"host": "algo-1", "rank": 0, "time": 1, "likely_victim": True, "traceback": ["Connection reset by peer"]}
    stopped = {"host": "algo-3", "rank": None, "time": 2, "signal": "SIGTERM", "traceback": []}
    cause = {"host": "algo-2", "rank": 3, "time": 5, "likely_victim": False, "traceback": ["ValueError: boom"]}
    later = {"host": "algo-4", "rank": 6, "time": 9, "likely_victim": False, "traceback": ["KeyError"]}
    assert first_failure([victim, stopped, later, cause]) is cause
    assert first_failure([victim, stopped]) is stopped
    assert first_failure([]) is None


def test_describe_failure_uses_failure_json_then_falls_back_to_the_log(tmp_path):
    f1 = tmp_path / "f1.json"
    f1.write_text(json.dumps({"host": "algo-2", "reported_by": "algo-1", "rank": 3, "exit_code": 1, "signal": None,
                              "time": 5, "traceback": ["Traceback", "ValueError: boom"], "likely_victim": False}))
    log1, log2 = tmp_path / "algo-1.log", tmp_path / "algo-2.log"
    log1.write_text("a\n")
    log2.write_text("x\ny\nRuntimeError: runtime died\n")
    reason, text = describe_failure({"algo-1": f1, "algo-2": tmp_path / "none.json"},
                                    {"algo-1": log1, "algo-2": log2}, None)
    assert reason == "host algo-2, rank 3 failed first with exit code 1"
    assert "  ValueError: boom" in text and str(log2) in text
    reason, text = describe_failure({"algo-2": tmp_path / "none.json"}, {"algo-2": log2},
                                    HostExit("algo-2", 2, 0.0))
    assert reason.startswith("host algo-2 failed first with exit code 2")
    assert "RuntimeError: runtime died" in text


def test_a_host_killed_without_failure_json_beats_the_victims_we_stopped(tmp_path):
    stopped = tmp_path / "algo-1.json"
    stopped.write_text(json.dumps({"host": "algo-1", "rank": None, "exit_code": 143, "signal": "SIGTERM",
                                   "time": 9e18, "traceback": ["x"], "likely_victim": True}))
    log2 = tmp_path / "algo-2.log"
    log2.write_text("[algo-2 r1] training step 7\n")
    reason, text = describe_failure({"algo-1": stopped, "algo-2": tmp_path / "absent.json"},
                                    {"algo-2": log2}, HostExit("algo-2", -9, 1.0))
    assert reason.startswith("host algo-2 failed first with exit code -9 (SIGKILL)")
    assert "training step 7" in text
    # ...but a real failure that happened before the host died still wins.
    real = tmp_path / "algo-3.json"
    real.write_text(json.dumps({"host": "algo-3", "rank": 4, "exit_code": 1, "time": 5e8,
                                "traceback": ["ValueError: first"], "likely_victim": False}))
    reason, _ = describe_failure({"algo-3": real, "algo-2": tmp_path / "absent.json"}, {},
                                 HostExit("algo-2", -9, 1.0))
    assert reason.startswith("host algo-3, rank 4 failed first")


def _rank(folder, pid: int, rank: int, exit_code: int | None = None, at_ns: int = 0) -> None:
    """What a rank leaves in its stacks folder: <pid>.txt at start-up, <pid>.exit when it calls exit()."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{pid}.txt").write_text(json.dumps({"pid": pid, "rank": rank}) + "\n")
    if exit_code is not None:
        (folder / f"{pid}.exit").write_text(json.dumps({"pid": pid, "code": exit_code, "time_ns": at_ns}) + "\n")


def test_early_exits_name_a_rank_that_left_while_others_ran(tmp_path):
    from smdist_launcher.backends.toolkit.diagnosis import early_exits

    s = 1_000_000_000
    a1, a2 = tmp_path / "algo-1", tmp_path / "algo-2"
    _rank(a1, 10, 0)                       # still running (stopped later: no exit note)
    _rank(a1, 11, 1)
    _rank(a2, 20, 2, exit_code=1, at_ns=9 * s)   # failed: not an "exited 0"
    _rank(a2, 21, 3, exit_code=0, at_ns=5 * s)   # the early one
    ranks = {0: "algo-1", 1: "algo-1", 2: "algo-2", 3: "algo-2"}
    found = early_exits({"algo-1": a1, "algo-2": a2}, ranks, before_ns=8 * s)
    assert len(found) == 1 and found[0].startswith("rank 3 (algo-2) exited 0 at ")
    assert found[0].endswith("while ranks 0-2 were still running")
    assert early_exits({"algo-1": a1, "algo-2": a2}, ranks, before_ns=4 * s) == []  # left after the job failed



@pytest.mark.parametrize(("failure", "cause"), [
    # a crash is the same on every attempt: not retried by default (only SIGKILL/SIGTERM come from outside)
    ({"signal": "SIGSEGV", "exit_code": -11, "traceback": []}, Cause.SCRIPT_ERROR),
    ({"signal": "SIGABRT", "exit_code": -6, "traceback": []}, Cause.SCRIPT_ERROR),
    ({"signal": None, "exit_code": -7, "traceback": []}, Cause.SCRIPT_ERROR),  # SIGBUS, by its exit code
    ({"signal": "SIGFPE", "exit_code": -8, "traceback": ["Fatal Python error: Floating point exception"]},
     Cause.SCRIPT_ERROR),
    ({"signal": "SIGKILL", "exit_code": -9, "traceback": []}, Cause.KILLED),
    ({"signal": None, "exit_code": -15, "traceback": ["Terminated"]}, Cause.KILLED),
    # the NCCL watchdog aborts the rank after a collective timed out: a timeout, SIGABRT or not
    ({"signal": "SIGABRT", "exit_code": -6, "traceback": [
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=1000) ran for 1002 milliseconds before timing out."]}, Cause.TIMEOUT),
    ({"exit_code": 1, "traceback": ["Traceback (most recent call last):", "TimeoutError: timed out"]}, Cause.TIMEOUT),
    # "timeout" in the script's own error is no timeout
    ({"exit_code": 1, "traceback": ["Traceback (most recent call last):", "ValueError: bad timeout: -1"]},
     Cause.SCRIPT_ERROR),
])
def test_failure_cause_by_signal_origin_and_exception_class(tmp_path, failure, cause):
    path = tmp_path / "failure.json"
    path.write_text(json.dumps({"host": "algo-1", "rank": 0, "time": 1, **failure}))
    assert failure_cause({"algo-1": path}, None) is cause


def test_failure_records_and_rank_notes_are_not_read_through_planted_links(tmp_path):
    """Root reads these from a host folder the job owns (issue 28): a link is refused, never followed."""
    import json as _json

    from smdist_launcher.backends.toolkit.diagnosis import early_exits, read_failures
    from smdist_launcher.backends.toolkit.log_mux import tail

    outside = tmp_path / "root"
    outside.mkdir()
    (outside / "config.json").write_text(_json.dumps({"auths": {"registry": {"auth": "cm9vdDpzZWNyZXQ="}}}))
    (outside / "notes.txt").write_text(_json.dumps({"rank": 0}) + "\n")
    (outside / "exit.json").write_text(_json.dumps({"code": 0, "time_ns": 1}))
    host = tmp_path / "job" / "hosts" / "algo-1" / "opt" / "ml"
    (host / "output").mkdir(parents=True)
    (host / "output" / "failure.json").symlink_to(outside / "config.json")
    assert read_failures({"algo-1": host / "output" / "failure.json"}) == []
    stacks = host / "run" / "stacks"
    stacks.mkdir(parents=True)
    (stacks / "100.txt").symlink_to(outside / "notes.txt")
    (stacks / "100.exit").symlink_to(outside / "exit.json")
    (stacks / "200.txt").write_text(_json.dumps({"rank": 1}) + "\n")  # a real rank, still running
    assert early_exits({"algo-1": stacks}, {0: "algo-1", 1: "algo-1"}) == []
    logs = tmp_path / "job" / "logs"
    logs.mkdir()
    (logs / "algo-1.log").symlink_to(outside / "config.json")
    assert tail(logs / "algo-1.log") == []


def _docker_kill_records(tmp_path):
    """What the CI run of a docker job with kill-host:algo-2 left: the docker client of algo-2 was killed (-9) but its
    container ran on, and its runtime then wrote failure.json as a victim with exit code 1 (no signal), 1.3 s after
    the kill; algo-1 got our SIGTERM (its traceback: mpirun's job map)."""
    algo1, algo2 = tmp_path / "algo-1.json", tmp_path / "algo-2.json"
    algo1.write_text(json.dumps({"host": "algo-1", "rank": None, "exit_code": 143, "signal": "SIGTERM",
                                 "time": 126_560_279_470, "traceback": [" Data for node: algo-1"],
                                 "likely_victim": True}))
    algo2.write_text(json.dumps({"host": "algo-2", "rank": None, "exit_code": 1, "signal": None,
                                 "time": 126_559_062_110, "traceback": [], "likely_victim": True}))
    return {"algo-1": algo1, "algo-2": algo2}


def test_a_host_the_fault_rehearsal_killed_is_lost_whatever_its_exit_code(tmp_path):
    """kill-host:algo-2 fired at t=125.2 s: the attempt lost a host (retried), though its placement reported exit
    code 1 and its runtime wrote failure.json after the kill. Without the record it reads as the script's error."""
    from smdist_launcher.backends.toolkit.faults import KilledHost

    files = _docker_kill_records(tmp_path)
    killed = KilledHost("algo-2", "kill-host:algo-2@1", 125.241)
    assert failure_cause(files, HostExit("algo-2", 1, 125.3)) is Cause.SCRIPT_ERROR  # the records alone mislead
    for code in (1, 137, -9):  # docker's client, docker's client after `docker kill`, a process or netns host
        assert failure_cause(files, HostExit("algo-2", code, 125.3), killed) is Cause.HOST_LOST
    log2 = tmp_path / "algo-2.log"
    log2.write_text("[algo-2 r2] step 0 rank 2 attempt 1\n")
    reason, text = describe_failure(files, {"algo-2": log2}, HostExit("algo-2", 1, 125.3), killed)
    assert reason == "host algo-2 was lost: killed by the injected fault kill-host:algo-2@1 (it exited with code 1)"
    assert "step 0 rank 2 attempt 1" in text


def test_a_real_failure_before_the_injected_kill_still_wins(tmp_path):
    from smdist_launcher.backends.toolkit.faults import KilledHost

    files = _docker_kill_records(tmp_path)
    real = tmp_path / "algo-3.json"
    real.write_text(json.dumps({"host": "algo-3", "rank": 4, "exit_code": 1, "time": 120_000_000_000,
                                "traceback": ["ValueError: first"], "likely_victim": False}))
    files["algo-3"] = real
    killed = KilledHost("algo-2", "kill-host:algo-2@1", 125.241)
    assert failure_cause(files, HostExit("algo-2", 1, 125.3), killed) is Cause.SCRIPT_ERROR
    assert describe_failure(files, {}, HostExit("algo-2", 1, 125.3), killed)[0].startswith("host algo-3, rank 4")


def test_a_host_that_filled_its_disk_and_left_no_failure_json_is_a_disk_full_not_a_lost_host(tmp_path):
    """The script filled the disk, so its runtime could not write failure.json and exited 1: its log's last lines say
    why. A client error the next attempt meets again (not retried by default), named in the reason with the host and
    the line (before: host_lost, "(no failure.json: the runtime itself failed)", retried)."""
    log = tmp_path / "algo-1.log"
    log.write_text("[algo-1 r0] step 3\n[algo-1 r0] Traceback (most recent call last):\n"
                   "[algo-1 r0]     f.write(block)\n[algo-1 r0] OSError: [Errno 28] No space left on device\n"
                   "[algo-1] failed: rank 0 exited with code 1; see /opt/ml/output/failure\n"
                   "[algo-1] OSError: [Errno 28] No space left on device: '/opt/ml/output/.smdist-1.tmp'\n")
    files, logs = {"algo-1": tmp_path / "absent.json"}, {"algo-1": log}
    assert failure_cause(files, HostExit("algo-1", 1, 1.0), log_files=logs) is Cause.DISK_FULL
    assert not Cause.DISK_FULL.curable
    reason, text = describe_failure(files, logs, HostExit("algo-1", 1, 1.0))
    assert reason == ("host algo-1 failed first with exit code 1: its disk is full "
                      "([algo-1 r0] OSError: [Errno 28] No space left on device)")
    assert "f.write(block)" in text


@pytest.mark.parametrize("code", [-9, 137])
def test_a_runtime_killed_outright_is_lost_whatever_its_log_said_before(tmp_path, code):
    """SIGKILL (a process host's -9, docker's 137): a lost host, retried, even when its log once said ENOSPC."""
    log = tmp_path / "algo-1.log"
    log.write_text("[algo-1 r0] warning: [Errno 28] No space left on device, retrying the save\n[algo-1 r0] step 9\n")
    files, logs = {"algo-1": tmp_path / "absent.json"}, {"algo-1": log}
    assert failure_cause(files, HostExit("algo-1", code, 1.0), log_files=logs) is Cause.HOST_LOST
    assert "disk" not in describe_failure(files, logs, HostExit("algo-1", code, 1.0))[0]


def test_a_full_disk_of_an_earlier_attempt_is_no_evidence_for_this_one(tmp_path):
    """The logs append every attempt: what attempt 1 printed before `---- attempt 2 ----` says nothing of attempt 2,
    whose runtime exited 1 without a word (host_lost, as before)."""
    log = tmp_path / "algo-1.log"
    log.write_text("[algo-1 r0] OSError: [Errno 28] No space left on device\n"
                   "[algo-1] [smdist] ---- attempt 2 ----\n[algo-1 r0] step 0\n")
    files, logs = {"algo-1": tmp_path / "absent.json"}, {"algo-1": log}
    assert failure_cause(files, HostExit("algo-1", 1, 1.0), log_files=logs) is Cause.HOST_LOST
    log.write_text("[algo-1 r0] step 9\n")  # and no evidence at all: the runtime itself failed
    assert failure_cause(files, HostExit("algo-1", 1, 1.0), log_files=logs) is Cause.HOST_LOST
    assert describe_failure(files, logs, HostExit("algo-1", 1, 1.0))[0] == (
        "host algo-1 failed first with exit code 1 (no failure.json: the runtime itself failed)")


def test_a_failure_record_that_says_the_disk_was_full_is_a_disk_full(tmp_path):
    """failure.json written over the runtime's reserve (`disk_full`), or a rank's exception that is a full disk:
    disk_full, the reason naming it; a word of the traceback that is not its exception is no evidence."""
    path = tmp_path / "failure.json"
    record = {"host": "algo-1", "rank": 0, "exit_code": 1, "time": 5, "likely_victim": False,
              "traceback": ["Traceback (most recent call last):", "OSError: [Errno 122] Disk quota exceeded"]}
    path.write_text(json.dumps(record))
    assert failure_cause({"algo-1": path}, None) is Cause.DISK_FULL
    assert describe_failure({"algo-1": path}, {}, None)[0] == (
        "host algo-1, rank 0 failed first with exit code 1: its disk is full "
        "(OSError: [Errno 122] Disk quota exceeded)")
    path.write_text(json.dumps({**record, "traceback": ["# on No space left on device we retry", "ValueError: x"]}))
    assert failure_cause({"algo-1": path}, None) is Cause.SCRIPT_ERROR
    path.write_text(json.dumps({**record, "signal": "SIGBUS", "traceback": ["Bus error"],
                                "disk_full": "failure.json could not be written: [Errno 28] No space left on device"}))
    assert failure_cause({"algo-1": path}, None) is Cause.DISK_FULL
    assert describe_failure({"algo-1": path}, {}, None)[0].endswith(
        ": its disk is full (failure.json could not be written: [Errno 28] No space left on device)")
