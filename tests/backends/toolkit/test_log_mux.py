from __future__ import annotations

from smdist_launcher.backends.toolkit.log_mux import LogMux


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
