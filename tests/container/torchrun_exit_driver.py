"""One torchrun agent with torch's exit barrier forced into the order that loses the race (tests/container/
test_torchrun_agent.py): node 0 arrives first; node 1 arrives last (its add sets the barrier's key) and then reads the
key back only when the test says so, after node 0's agent has exited (plain torchrun) or is holding the store (ours).

usage: python torchrun_exit_driver.py {ours,plain} MARKER_DIR <torchrun arguments with --node_rank N>"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import torch.distributed.elastic.utils.store as store_util

from smdist_launcher.container import torchrun_agent

mode, markers, argv = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
node = int(argv[argv.index("--node_rank") + 1])
original = store_util._barrier_nonblocking


def _wait_for(name: str) -> None:
    while not (markers / name).exists():
        time.sleep(0.02)


def forced_order(store, world_size: int, key_prefix: str) -> str:  # type: ignore[no-untyped-def]
    if node == 1:
        _wait_for("node0-arrived")
    key = original(store=store, world_size=world_size, key_prefix=key_prefix)
    if node == 0:
        (markers / "node0-arrived").touch()
    else:
        _wait_for("release")
    return key


store_util._barrier_nonblocking = forced_order
if mode == "ours":
    hold = torchrun_agent.hold

    def marked_hold(run_store):  # type: ignore[no-untyped-def]
        (markers / "node0-holding").touch()  # node 0 keeps the store from here on
        hold(run_store)

    torchrun_agent.hold = marked_hold
    torchrun_agent.main(argv)
else:
    from torch.distributed.run import main

    main(argv)
