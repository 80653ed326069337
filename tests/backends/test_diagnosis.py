from __future__ import annotations

import json

from smdist_launcher.backends.local.diagnosis import describe_failure, first_failure
from smdist_launcher.backends.local.supervisor import HostExit


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
