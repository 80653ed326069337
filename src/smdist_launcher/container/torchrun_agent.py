"""torchrun as every host runs it: ``python -m smdist_launcher.container.torchrun_agent <torchrun arguments>``.

The same torchrun (same arguments, same agent, same static rendezvous, node ranks as planned), with one change: the
agent that hosts the rendezvous store keeps it until every agent has left its exit barrier.

Why (issue 32, torch 2.4-2.13): with static rendezvous the store is a TCPStore served by node 0's agent process.
torch's exit barrier (``elastic/utils/store.py: barrier``) is ``add(num_members)``, the last arrival
``set(last_member)``, then everyone ``wait(last_member)``. Node 0 sees the key and exits at once, closing the store;
an agent that arrived last and has not yet read the key back finds the connection gone: ``recvValueWithTimeout
failed``, a C++ frame list and ``Error waiting on exit barrier`` on a job that completed. Load widens the window.

The fix: the rendezvous handler is torch's static one under another name (``smdist-static``), and:

- every agent whose run ended normally says it left (``add(left)``; the last one ``set(all_left)``);
- node 0's agent, once the exit barrier completed (``last_member`` is set: every agent is in or past its wait),
  waits for ``all_left`` before its process may end (bounded: an agent killed after the barrier never says it left).

A failed group skips torch's exit barrier, so nothing waits there and a failure ends as fast as before. No other
agent hosts anything, so the store outlives every reader by construction.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

BACKEND = "smdist-static"
LEFT_KEY = "smdist/agents_left"
ALL_LEFT_KEY = "smdist/all_agents_left"
HOLD_S = 120.0  # longest node 0 keeps the store for an agent that never says it left (killed after the barrier)
POLL_S = 0.02

# torch's exit-barrier keys (agent/server/api.py _TERMINAL_STATE_SYNC_ID, utils/store.py _LAST_MEMBER_CHECKIN; private,
# unchanged since torch 1.9, tests/container/test_torchrun_agent.py compares them). Literal here: the runtime imports
# this module (the container-command shim) without torch.
BARRIER_PREFIX, LAST_MEMBER = "torchelastic/agent/terminal_state", "/last_member"

_handlers: list[Any] = []  # every handler made here: it holds the store (and, on node 0, its server) alive


def _handler_class() -> type:
    from torch.distributed.elastic.rendezvous.static_tcp_rendezvous import StaticTCPRendezvous

    class HeldStoreRendezvous(StaticTCPRendezvous):
        """torch's static rendezvous (node 0 serves the TCPStore), registered as BACKEND."""

        def get_backend(self) -> str:
            return BACKEND

    return HeldStoreRendezvous


def _create_handler(params: Any) -> Any:
    from torch.distributed.elastic.rendezvous.static_tcp_rendezvous import create_rdzv_handler

    static: Any = create_rdzv_handler(params)
    # --rdzv-conf values are strings: torch's static handler, fed by --node-rank, gets an int
    handler = _handler_class()(static.master_addr, static.master_port, int(static.rank), static.world_size,
                               static.run_id, int(static.timeout.total_seconds()))
    _handlers.append(handler)
    return handler


def register() -> None:
    from torch.distributed.elastic.rendezvous import rendezvous_handler_registry

    rendezvous_handler_registry.register(BACKEND, _create_handler)


def with_held_store(args: Any) -> Any:
    """torchrun's parsed arguments with the static multi-node rendezvous under BACKEND (node rank as --rdzv-conf
    rank, so torchrun warns about neither --master-addr nor --node-rank). Other launches are left as they are."""
    from torch.distributed.run import parse_min_max_nnodes

    _, max_nodes = parse_min_max_nnodes(args.nnodes)
    if args.standalone or args.rdzv_backend != "static" or args.rdzv_endpoint or max_nodes < 2:
        return args
    port = args.master_port if args.master_port is not None else 29500
    conf = [c for c in (args.rdzv_conf or "").split(",") if c.strip()]
    args.rdzv_backend = BACKEND
    args.rdzv_endpoint = f"{args.master_addr}:{port}"
    args.rdzv_conf = ",".join([*conf, f"rank={args.node_rank}"])
    args.node_rank = 0
    return args


def leave(handler: Any) -> None:
    """This agent's run ended normally: say so; node 0 then keeps the store until every agent has said so."""
    store = handler._store
    if store is None:  # the agent never reached the rendezvous
        return
    from torch.distributed import DistError, PrefixStore

    run_store = PrefixStore(handler.run_id, store)
    try:
        if run_store.add(LEFT_KEY, 1) == handler.world_size:
            run_store.set(ALL_LEFT_KEY, "1")
    except DistError:  # node 0 is gone already: it failed (its own failure is the one to read), nothing waits
        return
    if handler.rank == 0 and run_store.check([BARRIER_PREFIX + LAST_MEMBER]):
        hold(run_store)


def hold(run_store: Any) -> None:
    """Node 0, every agent in or past the exit barrier: keep the store until all have left (at most HOLD_S)."""
    deadline = time.monotonic() + HOLD_S
    # check() and a short sleep, not one long wait(): a SIGTERM must still reach torch's handler at once
    while not run_store.check([ALL_LEFT_KEY]) and time.monotonic() < deadline:
        time.sleep(POLL_S)


def write_shim(folder: Path) -> Path:
    """`folder/torchrun`: this module with the interpreter that runs smdist-train, for commands that find torchrun
    on PATH (a container command's drivers, container/container_command.py)."""
    from .gpu_listing import write_module_shim

    return write_module_shim(folder, "torchrun", __spec__.name if __spec__ else __name__)


def main(argv: list[str] | None = None) -> None:
    from torch.distributed.elastic.multiprocessing.errors import record
    from torch.distributed.run import parse_args, run

    @record
    def _main() -> None:  # torchrun's own main, with the held-store rendezvous
        register()
        run(with_held_store(parse_args(sys.argv[1:] if argv is None else argv)))
        for handler in _handlers:
            leave(handler)

    _main()


if __name__ == "__main__":
    main()
