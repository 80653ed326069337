"""The forced command of the job's key in a worker host's sshd (`command="..."` in authorized_keys).

Whatever the client asked for arrives in $SSH_ORIGINAL_COMMAND; only three requests are served:
- `smdist-ping`: the master's readiness probe (sshd answers and the job key is accepted);
- `smdist-done CODE`: the master's mpirun has finished with exit code CODE (the worker then exits with it);
- anything else goes to this host's runtime (container/rsh_server.py), which accepts OpenMPI's orted only and runs
  it as its own child with the host's full environment: secrets never pass through sshd or files.

    python -m smdist_launcher.container.ssh_command --root <host's /opt/ml>
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..contract import MLPaths, write_json
from .rsh_agent import DEFAULT_WAIT_S, relay

PING = "smdist-ping"
DONE = "smdist-done"
ORIGINAL_COMMAND_ENV = "SSH_ORIGINAL_COMMAND"


def done_file(paths: MLPaths) -> Path:
    """Where `smdist-done` leaves the master's verdict for this host's runtime."""
    return paths.run_dir / "ssh" / "master_done.json"


def _record_done(paths: MLPaths, words: list[str]) -> int:
    if len(words) != 2 or not words[1].lstrip("-").isdigit():
        print(f"smdist ssh: usage: {DONE} EXIT_CODE", file=sys.stderr)
        return 2
    write_json(done_file(paths), {"exit_code": int(words[1])})
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="smdist-ssh-command")
    parser.add_argument("--root", required=True, help="this host's /opt/ml")
    parser.add_argument("--host", required=True, help="this host's name (for messages)")
    args = parser.parse_args(argv)
    paths = MLPaths(args.root)
    command = os.environ.get(ORIGINAL_COMMAND_ENV, "").strip()
    words = command.split()
    if not words:
        print("smdist ssh: no interactive sessions on a job host; run a command", file=sys.stderr)
        return 255
    if words == [PING]:
        print("ok", flush=True)
        return 0
    if words[0] == DONE:
        return _record_done(paths, words)
    return relay(args.host, paths.root, command, DEFAULT_WAIT_S)


if __name__ == "__main__":
    sys.exit(main())
