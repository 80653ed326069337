"""Fault rehearsal on real processes: a fault fires into the attempt that runs; one due while no attempt runs waits
for the next; a rank fault signals only the process carrying this job's and this attempt's marker."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

from smdist_launcher.backends.local.fault_injection import FaultInjector, LiveAttempt
from smdist_launcher.backends.toolkit.faults import parse_fault
from smdist_launcher.backends.toolkit.process_sweep import JOB_ID_ENV
from smdist_launcher.backends.toolkit.resilience_plan import ATTEMPT_ENV

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def _start(env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(SLEEPER, start_new_session=True, env={**os.environ, **(env or {})})


def _live(number: int, hosts: dict[str, subprocess.Popen[bytes]], preempted: threading.Event) -> LiveAttempt:
    return LiveAttempt(number, {h: p.pid for h, p in hosts.items()}, lambda: False, preempted.set)


def test_a_kill_host_due_between_attempts_fires_into_the_next_one() -> None:
    notes: list[str] = []
    injected: list[dict] = []
    injector = FaultInjector("job-1", [parse_fault("kill-host:algo-2@0")], notes.append, injected.append)
    first = {"algo-1": _start(), "algo-2": _start()}
    try:
        injector.first_rank_up(0.0)   # due at once, but no attempt runs: it waits
        second = {"algo-1": _start(), "algo-2": _start()}
        injector.attempt_running(_live(2, second, threading.Event()))
        assert second["algo-2"].wait(timeout=60) == -signal.SIGKILL
        assert first["algo-2"].poll() is None and second["algo-1"].poll() is None  # only the live attempt's algo-2
        assert [i["attempt"] for i in injected] == [2] and notes == ["injecting kill-host:algo-2@0"]
    finally:
        injector.close()
        for p in [*first.values(), *locals().get("second", {}).values()]:
            p.kill()
            p.wait()


def test_a_rank_fault_signals_only_this_attempts_marked_process() -> None:
    """A rank 0 of attempt 1 still alive (or a pid reused) is left alone: only the marked rank of attempt 2 dies."""
    old = _start({JOB_ID_ENV: "job-2", ATTEMPT_ENV: "1", "RANK": "0"})
    other_job = _start({JOB_ID_ENV: "job-3", ATTEMPT_ENV: "2", "RANK": "0"})
    rank = _start({JOB_ID_ENV: "job-2", ATTEMPT_ENV: "2", "RANK": "0"})
    injector = FaultInjector("job-2", [], lambda _: None, lambda _: None)
    try:
        injector.fire(parse_fault("kill-rank:0@0"), _live(2, {}, threading.Event()))
        assert rank.wait(timeout=60) == -signal.SIGKILL
        assert old.poll() is None and other_job.poll() is None
    finally:
        for p in (old, other_job, rank):
            p.kill()
            p.wait()


def test_preempt_asks_the_attempt_to_stop() -> None:
    preempted = threading.Event()
    FaultInjector("job-4", [], lambda _: None, lambda _: None).fire(parse_fault("preempt@0"),
                                                                     _live(1, {}, preempted))
    assert preempted.is_set()


def test_a_killed_host_is_on_record_for_its_attempt_and_the_placement_kills_it() -> None:
    """A placement with its own kill (docker kills the container, not its client) is used instead of SIGKILL to the
    host's process group; either way the attempt keeps which host was killed, for its diagnosis."""
    hosts = {"algo-1": _start(), "algo-2": _start()}
    placement_killed: list[str] = []
    injector = FaultInjector("job-5", [], lambda _: None, lambda _: None)
    try:
        live = LiveAttempt(3, {h: p.pid for h, p in hosts.items()}, lambda: False, lambda: None,
                           kill_host=placement_killed.append)
        injector.fire(parse_fault("kill-host:algo-2@7"), live)
        assert placement_killed == ["algo-2"] and hosts["algo-2"].poll() is None  # the placement's kill only
        killed = injector.killed_in(3)
        assert killed is not None and (killed.host, killed.fault) == ("algo-2", "kill-host:algo-2@7")
        assert injector.killed_in(2) is None
        injector.fire(parse_fault("kill-host:algo-1@8"), _live(4, hosts, threading.Event()))
        assert hosts["algo-1"].wait(timeout=60) == -signal.SIGKILL
        assert injector.killed_in(4) is not None and injector.killed_in(4).host == "algo-1"  # type: ignore[union-attr]
    finally:
        for p in hosts.values():
            p.kill()
            p.wait()
