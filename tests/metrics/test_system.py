"""The sampler on real processes: a busy child tree shows up in its host's CPU, an idle one does not."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from smdist_launcher.metrics.store import SYSTEM, read_points
from smdist_launcher.metrics.system import CPU, DISK, MEMORY, SampledHost, SystemSampler

BUSY = "import subprocess, sys\n" \
       "child = subprocess.Popen([sys.executable, '-c', 'while True: pass'])\n" \
       "child.wait()\n"
IDLE = "import time; time.sleep(60)"


@pytest.fixture
def trees():
    busy = subprocess.Popen([sys.executable, "-c", BUSY])
    idle = subprocess.Popen([sys.executable, "-c", IDLE])
    yield busy, idle
    import psutil

    for root in (busy, idle):
        for p in psutil.Process(root.pid).children(recursive=True):
            p.kill()
        root.kill()
        root.wait()


def test_each_host_gets_its_own_process_tree(trees, tmp_path: Path) -> None:
    busy, idle = trees
    hosts = [SampledHost("algo-1", busy.pid, disk_path=str(tmp_path)), SampledHost("algo-2", idle.pid)]
    sampler = SystemSampler(hosts, lambda points: None, interval_s=60)
    sampler.start()  # primes; the busy grandchild may not exist yet: poll until it is in the tree
    deadline = time.monotonic() + 30
    while len(sampler._tree(hosts[0])) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    points = {(p.host, p.name): p for p in sampler.sample()}  # primes the grandchild's CPU counter
    # A loaded machine may give the spinner no CPU in one short window: sample until it got some (its share
    # depends on the load), within a generous bound, rather than judging a single window
    deadline = time.monotonic() + 60
    while True:
        time.sleep(0.5)
        points = {(p.host, p.name): p for p in sampler.sample()}
        busy_cpu = points.get(("algo-1", CPU))
        if (busy_cpu is not None and busy_cpu.value > 1.0) or time.monotonic() > deadline:
            break
    sampler.stop()
    assert all(p.kind == SYSTEM and p.rank is None for p in points.values())
    # the spinning grandchild counts for algo-1 (how much it got depends on the machine's load); algo-2 sleeps
    assert points[("algo-1", CPU)].value > 1.0 > points[("algo-2", CPU)].value
    assert points[("algo-1", MEMORY)].value > 0.0 and points[("algo-2", MEMORY)].value > 0.0
    assert 0.0 < points[("algo-1", DISK)].value <= 100.0
    assert ("algo-2", DISK) not in points  # no /opt/ml given


def test_the_thread_feeds_the_sink_and_a_gone_host_gives_zero(tmp_path: Path) -> None:
    from smdist_launcher.metrics.store import MetricWriter

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    writer = MetricWriter(tmp_path / "metrics.jsonl")
    live = subprocess.Popen([sys.executable, "-c", IDLE])
    try:
        sampler = SystemSampler([SampledHost("algo-1", live.pid), SampledHost("algo-2", gone.pid)],
                                writer.write_many, interval_s=0.1)
        sampler.start()
        deadline = time.monotonic() + 30
        while len({p.host for p in read_points(tmp_path)}) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        sampler.stop()
    finally:
        live.kill()
        live.wait()
    points = read_points(tmp_path)
    assert {p.host for p in points} == {"algo-1", "algo-2"}
    assert {p.value for p in points if p.host == "algo-2"} == {0.0}


def test_a_located_root_replaces_the_started_process(trees) -> None:
    """docker: the launcher started the docker client; the container's processes are found by the placement."""
    busy, idle = trees
    answers = iter([None, idle.pid])  # not running yet, then found
    host = SampledHost("algo-1", busy.pid, locate=lambda: next(answers))
    sampler = SystemSampler([host], lambda points: None, interval_s=60)
    assert sampler._tree(host) == []
    assert [p.pid for p in sampler._tree(host)] == [idle.pid]
    assert [p.pid for p in sampler._tree(host)] == [idle.pid]  # kept while it lives: not asked again
