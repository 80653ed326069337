"""The first process of a netns-backend host, already inside the host's network namespace (nsenter --net).

It makes the rest of a host before it becomes the host's runtime (exec, same pid, so the supervisor's pid stays
the runtime's): its own hostname, its own /opt/ml (the host's tree), an /etc/hosts naming every host
(container/host_isolation.py), and a private /run holding sshd's privilege-separation directory, so that nothing
is written to the machine's /run.

    python -m smdist_launcher.backends.netns.host_entry --host algo-2 --root <tree> --addresses JSON \\
        --scratch DIR -- <runtime argv with --root <tree>>

Stdlib only (it runs before the runtime; no pydantic)."""
from __future__ import annotations

import argparse
import json
import os
import sys

from ...container.host_isolation import isolate_host, mount

CONTAINER_ROOT = "/opt/ml"


def private_run() -> None:
    """A tmpfs on /run that only this host's mount namespace sees, with /run/sshd in it."""
    mount("tmpfs", "/run", "tmpfs", 0, "mode=0755")
    os.mkdir("/run/sshd", 0o755)


def runtime_argv(argv: list[str], root: str, container_root: str | None) -> list[str]:
    """The runtime's argv, its --root moved to /opt/ml when the host's tree is mounted there."""
    out = list(argv)
    if container_root:
        for i, token in enumerate(out[:-1]):
            if token == "--root" and out[i + 1] == root:
                out[i + 1] = container_root
    return out


def main(argv: list[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args_in:
        print("host_entry: usage: ... -- RUNTIME ARGV", file=sys.stderr)
        return 2
    cut = args_in.index("--")
    parser = argparse.ArgumentParser(prog="smdist-netns-host")
    parser.add_argument("--host", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--addresses", required=True, help="JSON {host: address}")
    parser.add_argument("--scratch", required=True)
    parser.add_argument("--container-command", metavar="JOB_KEY",
                        help="a container-command job's host (netns/container_host.py); the job's ssh key")
    parser.add_argument("--keep", action="append", default=[], help="a folder that stays visible under a private /tmp")
    args = parser.parse_args(args_in[:cut])
    command = args_in[cut + 1:]
    isolation = isolate_host(args.host, args.root, addresses=json.loads(args.addresses), scratch=args.scratch)
    if not (isolation.opt_ml and isolation.hostname and isolation.hosts_file):
        print(f"[{args.host}] netns host set-up failed: {isolation}", file=sys.stderr, flush=True)
        return 1
    try:
        private_run()
    except OSError as e:
        print(f"[{args.host}] netns host set-up failed: a private /run for sshd: {e}", file=sys.stderr, flush=True)
        return 1
    if args.container_command:
        from pathlib import Path

        from .container_host import set_up

        try:
            set_up(Path(args.container_command), args.keep, args.scratch)
        except OSError as e:
            print(f"[{args.host}] netns host set-up failed: a container's /tmp, /etc/environment, ~/.ssh: {e}",
                  file=sys.stderr, flush=True)
            return 1
    command = runtime_argv(command, args.root, CONTAINER_ROOT)
    os.execv(command[0], command)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
