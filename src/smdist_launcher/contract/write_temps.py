"""The temporary files of our atomic writes (written beside the target, renamed over it when whole), named so that a
sweep can tell a stale one from one a live writer is still writing.

A writer killed mid-copy (SIGKILL, a lost node) leaves its temp file behind: in a checkpoint folder it would be
restored and saved again, as if a checkpoint, on every attempt after. So the name carries its writer:
`.smdist-<machine>-<pid>-<random>.tmp`, and a temp file is stale only when it was written on this machine (its
hostname and pid namespace) by a pid that no process has now. Another machine's (a shared folder), another pid
namespace's (a container of the same hostname) or a live process's is never stale; a pid reused since only keeps a
stale file until that process ends too.

Runtime-safe: stdlib only."""
from __future__ import annotations

import os
import re
import secrets
import socket

TEMP_PREFIX = ".smdist-"
TEMP_SUFFIX = ".tmp"
_MACHINE_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_WRITER = re.compile(r"^\.smdist-(?P<machine>[A-Za-z0-9._-]{1,64})-(?P<pid>\d{1,10})-[0-9a-f]{16}\.tmp$")


def _machine() -> str:
    """This machine's hostname, as a temp file's name may hold it (a hostname may be any bytes in a container), and
    the pid namespace its pid means something in: a process in a container of the same hostname (docker --network
    host) has pids that are not alive in ours while it is, and its temp files must never look stale to us."""
    host = _MACHINE_CHARS.sub("_", socket.gethostname()) or "localhost"
    try:
        tag = f".ns{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:  # no /proc (not Linux): the hostname only
        return host[:64]
    return host[:64 - len(tag)] + tag


def temp_name() -> str:
    """A fresh temp file name of this process: its machine and pid (for a sweep), then 64 random bits (never a name
    another write, or a link the job planted, already has). Never derived from the target's name: a name of NAME_MAX
    bytes (a checkpoint's) would make it too long to create."""
    return f"{TEMP_PREFIX}{_machine()}-{os.getpid()}-{secrets.token_hex(8)}{TEMP_SUFFIX}"


def is_temp_name(name: str) -> bool:
    """A temp file of our writes, stale or live, of this naming or the one before it (`.smdist-<random>.tmp`): never
    a file of the job's to copy (a checkpoint restored or saved)."""
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)


def is_stale(name: str) -> bool:
    """A temp file whose writer is gone: this machine's, by a pid that is not alive (and not ours: another thread of
    this process may be writing it). A name of the naming before (no writer in it) is never stale: its writer may
    live."""
    found = _WRITER.match(name)
    if found is None or found["machine"] != _machine():
        return False
    pid = int(found["pid"])
    return pid != os.getpid() and not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # someone else's process, or a pid we cannot ask about: never swept
    return True
