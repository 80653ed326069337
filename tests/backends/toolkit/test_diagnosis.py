from __future__ import annotations

import json

from smdist_launcher.backends.toolkit.diagnosis import describe_failure, first_failure
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

