"""Where each still-running rank of a local job was stuck, asked for just before a hung job is stopped (max_run,
Ctrl-C, stop()). The ranks' registration and the asking are the runtime's (container/stack_dumps.py); here only
which processes are the job's (its SMDIST_JOB_ID marker) and where each host keeps its dumps."""
from __future__ import annotations

from pathlib import Path

from ...container.stack_dumps import RankStack, dump_stacks as _dump_stacks
from .process_sweep import job_processes

__all__ = ["RankStack", "dump_stacks"]


def dump_stacks(job_id: str, stacks_dirs: dict[str, Path], rank_hosts: dict[int, str]) -> list[RankStack]:
    """Each live rank's stack dump. `stacks_dirs`: host -> its stacks folder; `rank_hosts`: the plan's rank -> host."""
    return _dump_stacks(stacks_dirs, job_processes(job_id), rank_hosts)
