from __future__ import annotations

import os
import sys
from pathlib import Path

from smdist_launcher.backends.toolkit.log_mux import LogMux
from smdist_launcher.backends.toolkit.supervisor import HostLaunch, Supervisor


class Collect:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def line(self, host: str, text: str) -> None:
        self.lines.append((host, text))


def test_lines_are_saved_per_host_of_their_prefix_and_ranks_counted(tmp_path):
    files = {h: tmp_path / f"{h}.log" for h in ("algo-1", "algo-2")}
    console, ranks = Collect(), []
    mux = LogMux(files, console, on_new_rank=ranks.append)
    mux.on_line("algo-1", b"[algo-1] runtime line\n")
    mux.on_line("algo-1", b"[algo-2 r3] relayed by the mpirun master\n")   # goes to algo-2's log
    mux.on_line("algo-2", b"bare line without newline")
    mux.on_line("algo-2", b"[algo-2 r3] again\n")
    mux.on_line("algo-2", b"[INFO] looks like a prefix but is not a host\n")
    mux.close()
    assert files["algo-1"].read_text() == "[algo-1] runtime line\n"
    assert files["algo-2"].read_text() == ("[algo-2 r3] relayed by the mpirun master\n"
                                           "[algo-2] bare line without newline\n"
                                           "[algo-2 r3] again\n[algo-2] [INFO] looks like a prefix but is not a host\n")
    assert ranks == [3] and mux.lines == 5
    assert console.lines[2] == ("algo-2", "[algo-2] bare line without newline")


def test_a_full_disk_under_the_logs_never_stops_the_reader_and_fails_the_job(tmp_path):
    """A real host writing more than a pipe holds, its log on a full disk (/dev/full: ENOSPC on every write): the
    reader drains on, the host exits, and the mux says why the job must fail (once, however many lines failed)."""
    told: list[str] = []
    watched: list[str] = []
    console = Collect()
    mux = LogMux({"algo-1": Path("/dev/full")}, console, on_rank_line=lambda h, r, text: watched.append(text),
                 on_error=told.append)
    lines = 2000  # ~200 KB: more than a pipe buffer, so a dead reader would block the host
    code = f"for i in range({lines}): print('[algo-1 r0] step', i, 'x' * 90)"
    env = {**os.environ, "SMDIST_JOB_ID": "mux-enospc"}
    sup = Supervisor("mux-enospc", [HostLaunch("algo-1", [sys.executable, "-c", code], env, tmp_path)],
                     mux.on_line, max_run=60, grace=1.0)
    sup.start()
    outcome = sup.wait()
    mux.close()
    assert outcome.status == "Completed", outcome.reason
    assert len(console.lines) == lines and len(watched) == lines
    assert told == mux.errors and len(told) == 1
    assert mux.failure is not None and mux.failure.startswith("writing logs/algo-1.log failed: OSError: [Errno 28]")


def test_a_consumer_that_raises_stops_neither_the_line_nor_the_others(tmp_path):
    def watcher(host: str, rank: int | None, text: str) -> None:
        raise RuntimeError(f"cannot parse {text!r}")

    console = Collect()
    mux = LogMux({"algo-1": tmp_path / "algo-1.log"}, console, on_rank_line=watcher)
    mux.on_line("algo-1", b"[algo-1 r0] loss[/b]=1\n")
    mux.on_line("algo-1", b"[algo-1 r0] loss[/b]=2\n")
    mux.close()
    assert (tmp_path / "algo-1.log").read_text().count("loss[/b]") == 2 and len(console.lines) == 2
    assert mux.errors == ["the progress watcher failed: RuntimeError: cannot parse 'loss[/b]=1'"]
