"""Release the job's process groups while the interpreter is still whole (at a normal exit).

Why: a gloo worker thread drops its last reference to a finished collective a moment after the
caller's ``wait()`` has returned. If that frees a tensor whose Python object the C++ side owns, the
thread must take the GIL; once Python has started finalizing, taking the GIL ends the thread with a
forced unwind through a noexcept destructor and the rank aborts ("terminate called without an
active exception", pytorch#190489). ``destroy_process_group()`` alone does not help: device meshes
keep their groups (and DTensor's caches keep the meshes, and pipeline stages their group), so the
gloo threads outlive the script. Here, at exit, the groups are destroyed and the runtime's
references to them dropped, so each ProcessGroupGloo is destructed, which joins its worker threads
before finalization starts.
"""
from __future__ import annotations

import atexit
import gc
import sys
import weakref
from collections.abc import Callable
from typing import Any

import torch.distributed as dist

_releases: list[Callable[[], None]] = []
_registered = False


def release_at_exit(owner: Any, release: Callable[[Any], None]) -> None:
    """At a normal exit, after the process groups are destroyed, call ``release(owner)`` if it still lives."""
    global _registered
    ref = weakref.ref(owner)

    def run() -> None:
        alive = ref()
        if alive is not None:
            release(alive)

    _releases.append(run)
    if not _registered:
        atexit.register(release_process_groups)
        _registered = True


def track_mesh(mesh: Any) -> None:
    """Drop ``mesh``'s process groups at exit (the root mesh holds those of its slices and flattenings)."""
    release_at_exit(mesh, _drop_mesh_groups)


def _drop_mesh_groups(mesh: Any) -> None:
    registry = getattr(mesh, "_pg_registry", None)  # where torch >= 2.12 keeps the group objects
    if isinstance(registry, dict):
        registry.clear()


def release_process_groups() -> None:
    """Destroy the groups, drop the runtime's references, collect: the gloo threads are joined here."""
    if getattr(sys, "last_value", None) is not None or getattr(sys, "last_exc", None) is not None:
        # The script died of an exception: a thread may still wait in a collective on a peer, and
        # joining it could hang this rank instead of letting the launcher see the failure.
        return
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    releases = list(_releases)
    _releases.clear()
    for release in releases:
        release()
    gc.collect()  # the last references often sit in cycles (modules, closures of the step)
