from __future__ import annotations

import json
import threading
from pathlib import Path

from smdist_launcher.metrics.store import STORE_FILE, SYSTEM, MetricPoint, MetricWriter, host_store_file, read_points


def test_points_written_are_read_back_as_they_were(tmp_path: Path) -> None:
    writer = MetricWriter(tmp_path / STORE_FILE)
    a = MetricPoint("train:loss", 0.5, 100.0, "algo-1", rank=0, step=3)
    b = MetricPoint("CPUUtilization", 150.0, 101.0, "algo-2", kind=SYSTEM)
    writer.write(a)
    writer.write(b)
    # the first point is flushed at once (readable while the job runs); later ones at most FLUSH_EVERY_S late
    assert read_points(tmp_path) in ([a], [a, b])
    writer.close()
    assert read_points(tmp_path) == [a, b]
    line = json.loads((tmp_path / STORE_FILE).read_text().splitlines()[0])
    assert set(line) == {"name", "value", "timestamp", "host", "rank", "step", "kind"}


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    good = MetricPoint("train:loss", 1.0, 1.0, "algo-1", rank=1)
    (tmp_path / STORE_FILE).write_text(good.to_json() + "\n" + '{"name": "train:loss", "val')
    assert read_points(tmp_path) == [good]


def test_no_store_reads_as_no_points(tmp_path: Path) -> None:
    assert read_points(tmp_path / "missing") == []
    assert read_points(tmp_path) == []


def test_per_host_files_are_merged_oldest_first(tmp_path: Path) -> None:
    w1, w2 = MetricWriter(tmp_path / host_store_file("algo-1")), MetricWriter(tmp_path / host_store_file("algo-2"))
    w2.write(MetricPoint("m", 2.0, 2.0, "algo-2"))
    w1.write(MetricPoint("m", 1.0, 1.0, "algo-1"))
    w1.write(MetricPoint("m", 3.0, 3.0, "algo-1"))
    w1.close()
    w2.close()
    assert [p.value for p in read_points(tmp_path)] == [1.0, 2.0, 3.0]


def test_writers_in_many_threads_never_tear_a_line(tmp_path: Path) -> None:
    writer = MetricWriter(tmp_path / STORE_FILE)

    def burst(rank: int) -> None:
        for i in range(200):
            writer.write(MetricPoint("loss", float(i), float(i), "algo-1", rank=rank))

    threads = [threading.Thread(target=burst, args=(r,)) for r in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.close()
    assert len((tmp_path / STORE_FILE).read_text().splitlines()) == 800
    assert len(read_points(tmp_path)) == 800


def test_a_closed_writer_drops_late_points(tmp_path: Path) -> None:
    writer = MetricWriter(tmp_path / STORE_FILE)
    writer.close()
    writer.write(MetricPoint("m", 1.0, 1.0, "algo-1"))
    assert read_points(tmp_path) == []


def test_a_writer_without_points_leaves_no_file(tmp_path: Path) -> None:
    writer = MetricWriter(tmp_path / "job" / STORE_FILE)
    writer.close()
    assert not (tmp_path / "job").exists()


def test_iter_points_streams_every_file_oldest_first_holding_a_window(tmp_path: Path) -> None:
    """What a job's end delivers (iter_points): every host's file merged oldest first, neighbours a writer's threads
    stamped out of order put right, and the reading holds a window of points, not the store (read_points held all of
    it: a chatty job's store reaches gigabytes)."""
    import random
    import tracemalloc

    from smdist_launcher.metrics.store import iter_points

    rng = random.Random(7)
    for host in ("algo-1", "algo-2"):
        stamps = [1.7e9 + i / 10 + rng.uniform(-0.5, 0.5) for i in range(60_000)]  # out of order within 10 places
        (tmp_path / host_store_file(host)).write_text(
            "".join(MetricPoint("loss", i, t, host, 0).to_json() + "\n" for i, t in enumerate(stamps)))
    size = sum(f.stat().st_size for f in tmp_path.iterdir())
    tracemalloc.start()
    try:
        count, previous, peak_sorted = 0, 0.0, True
        for p in iter_points(tmp_path):
            peak_sorted &= p.timestamp >= previous
            previous, count = p.timestamp, count + 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == 120_000 and peak_sorted
    assert peak < size / 4, (peak, size)
    assert list(iter_points(tmp_path)) == read_points(tmp_path)
