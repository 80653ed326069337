"""container/torchrun_agent.py: the agent that hosts torchrun's store keeps it until every agent has left its exit
barrier, so a completed 2-node job ends without `Error waiting on exit barrier` (issue 32). The barrier is forced
into the losing order (torchrun_exit_driver.py), for plain torchrun (the race shows) and for ours (it cannot)."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from smdist_launcher.container import torchrun_agent

from .odd_interpreter import use_odd_interpreter

DRIVER = Path(__file__).with_name("torchrun_exit_driver.py")
# torch's own log lines at warning or error level ("W1127 10:00:00.123000 42 torch/..." or "[W1127 ...]")
AGENT_NOISE = re.compile(r"^\[?[EW]\d{4} |Traceback|Error waiting on exit barrier", re.M)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _two_agents(mode: str, tmp_path: Path) -> list[subprocess.CompletedProcess[str]]:
    markers = tmp_path / mode
    markers.mkdir()
    (tmp_path / "train.py").write_text("print('trained')\n")
    port = _free_port()
    procs = []
    for node in (0, 1):
        argv = [sys.executable, str(DRIVER), mode, str(markers), "--nnodes", "2", "--nproc_per_node", "1",
                "--master_addr", "127.0.0.1", "--master_port", str(port), "--node_rank", str(node), "train.py"]
        procs.append(subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}))
    # node 1 reads the barrier's key back only once node 0's agent is past its barrier: exited, or holding the store
    deadline = time.monotonic() + 120
    while procs[0].poll() is None and not (markers / "node0-holding").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    (markers / "release").touch()
    return [subprocess.CompletedProcess(p.args, p.wait(timeout=120), p.communicate()[0], "") for p in procs]


@pytest.fixture(scope="module")
def tmp_module(tmp_path_factory):
    return tmp_path_factory.mktemp("torchrun-exit")


def test_plain_torchrun_loses_the_race_when_forced(tmp_module):
    """The control: the forced order really is the issue's race (node 1's agent finds the store closed)."""
    node0, node1 = _two_agents("plain", tmp_module)
    assert node0.returncode == 0 and "trained" in node0.stdout
    assert "Error waiting on exit barrier" in node1.stdout, node1.stdout[-3000:]


def test_store_outlives_every_agent_exit_barrier(tmp_module):
    node0, node1 = _two_agents("ours", tmp_module)
    for agent in (node0, node1):
        assert agent.returncode == 0 and "trained" in agent.stdout, agent.stdout[-3000:]
        assert not AGENT_NOISE.search(agent.stdout), agent.stdout[-3000:]


def test_arguments_keep_the_planned_node_rank():
    from torch.distributed.run import parse_args

    args = torchrun_agent.with_held_store(parse_args(
        ["--nnodes", "2", "--nproc_per_node", "2", "--master_addr", "algo-1", "--master_port", "7777",
         "--node_rank", "1", "--rdzv-conf", "timeout=900", "train.py"]))
    assert (args.rdzv_backend, args.rdzv_endpoint, args.rdzv_conf, args.node_rank) == (
        torchrun_agent.BACKEND, "algo-1:7777", "timeout=900,rank=1", 0)
    single = parse_args(["--nnodes", "1", "--nproc_per_node", "2", "train.py"])
    assert torchrun_agent.with_held_store(single).rdzv_backend == "static"


def test_the_barrier_keys_are_torchs() -> None:
    from torch.distributed.elastic.agent.server.api import _TERMINAL_STATE_SYNC_ID
    from torch.distributed.elastic.utils.store import _LAST_MEMBER_CHECKIN

    assert torchrun_agent.BARRIER_PREFIX == _TERMINAL_STATE_SYNC_ID
    assert torchrun_agent.LAST_MEMBER == _LAST_MEMBER_CHECKIN


def test_the_path_shim_runs_the_agent_with_the_arguments_as_given(tmp_path: Path, monkeypatch) -> None:
    """`torchrun` on a container command's PATH: the interpreter's path is taken literally (a folder with a space,
    a `$` and a quote) and every argument reaches torchrun unchanged."""
    use_odd_interpreter(tmp_path, monkeypatch)
    shim = torchrun_agent.write_shim(tmp_path / "bin")
    args = ["a b", "c'd\"e", "$HOME", "*"]
    done = subprocess.run([str(shim), "--standalone", "--nproc_per_node", "1", "--no-python", "printf", "<%s>", *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "".join(f"<{a}>" for a in args) in done.stdout
