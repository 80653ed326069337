"""What reaches the screen: the ranks' output, not the launchers' chatter, and after the first failure only its rank."""
from __future__ import annotations

import io

from smdist_launcher.backends.toolkit.job_console import PlainConsole, RichConsole

TORCHRUN_RUN = """\
[algo-1] code directory /j/hosts/algo-1/opt/ml/code is not empty: using it as is (submit directory not unpacked)
[algo-1] running: python -m torch.distributed.run --nnodes 2 --nproc_per_node 2 train.py
[algo-1] \n[algo-1] *****************************************
[algo-1] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system
[algo-1] *****************************************
[algo-1 r0] hello from rank 0
[algo-1] [algo-1:05755] Warning: could not find environment variable "LD_LIBRARY_PATH"
[algo-1]  ========================   JOB MAP   ========================
[algo-1]  Data for node: algo-1\tNum slots: 2\tMax slots: 0\tNum procs: 2
[algo-1]  \tProcess OMPI jobid: [46749,1] App: 0 Process rank: 0 Bound: N/A
[algo-1]  =============================================================
[algo-1] a warning the user should see
[algo-2 r2] hello from rank 2
[algo-1 r1] [rank1]: Traceback (most recent call last):
[algo-1 r1] [rank1]: ValueError: bad batch
[algo-1 r0] [rank0]: Traceback (most recent call last):
[algo-1 r0] [rank0]: RuntimeError: Connection closed by peer
[algo-1] torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
[algo-1 r1] late line of the failing rank
[algo-1] success
"""


def test_console_shows_ranks_and_the_first_failure_only() -> None:
    stream = io.StringIO()
    console = PlainConsole(stream)
    for line in TORCHRUN_RUN.splitlines():
        console.line(line[1:7], line)
    console.note("job j Failed after 3.0 s: host algo-1, rank 1 failed first with exit code 1")
    assert stream.getvalue().splitlines() == [
        "[algo-1 r0] hello from rank 0",
        "[algo-1] a warning the user should see",
        "[algo-2 r2] hello from rank 2",
        "[smdist] rank 1 on algo-1 failed; the other ranks' output from here on goes to the log files only",
        "[algo-1 r1] [rank1]: Traceback (most recent call last):",
        "[algo-1 r1] [rank1]: ValueError: bad batch",
        "[algo-1 r1] late line of the failing rank",
        "[smdist] job j Failed after 3.0 s: host algo-1, rank 1 failed first with exit code 1",
    ]


def test_a_terminal_renders_job_text_as_text_never_markup() -> None:
    """A metric or job named like rich markup (`loss[/b]`, `[red]x`) on the status line and in the lines: shown as
    written, nothing raised (a MarkupError there killed the host's output reader)."""
    from rich.console import Console

    out = io.StringIO()
    console = RichConsole(["algo-1"], Console(file=out, force_terminal=True, width=200, highlight=False))
    console.status("job: running — 1/1 hosts up; loss[/b] 0.5, [red]acc 0.9")
    console.line("algo-1", "[algo-1 r0] step 1 loss[/b]=0.5 [bold]x")
    console.note("job [/i] failed: reason [/]")
    console.close()
    shown = out.getvalue()
    assert "step 1 loss[/b]=0.5 [bold]x" in shown and "job [/i] failed: reason [/]" in shown
