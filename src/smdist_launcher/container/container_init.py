"""A container command's first process, as a container's init: it runs the command, and when the command exits,
the "container" ends: whatever the command left running (SDK v3's MPI driver leaves `sshd -D` behind on every host)
is stopped, and the command's exit code is the host's. Without it a daemon holding the output pipe would keep the
host running after its command finished, which a SageMaker container never does.

    python -m smdist_launcher.container.container_init -- ARGV...

Stdlib only."""
from __future__ import annotations

import subprocess
import sys

from .process_tree import become_subreaper, terminate_descendants

# A daemon left behind gets this long after SIGTERM before SIGKILL: the command itself has already ended.
LEFTOVER_GRACE_S = 2.0


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "--" or len(argv) < 2:
        print("container_init: usage: python -m smdist_launcher.container.container_init -- ARGV...", file=sys.stderr)
        return 2
    become_subreaper()   # orphaned daemons reparent to us, so they can be found and stopped below
    try:
        code = subprocess.call(argv[1:])
    except OSError as exc:   # the entry point does not exist or cannot be run: what a container runtime says
        print(f"container_init: cannot run {argv[1]!r}: {exc.strerror}", file=sys.stderr, flush=True)
        code = 127 if isinstance(exc, FileNotFoundError) else 126
    terminate_descendants(LEFTOVER_GRACE_S)
    return code if code >= 0 else 128 - code   # killed by a signal: the shell's convention


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
