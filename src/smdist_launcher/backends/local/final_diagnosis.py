"""The final words of a local job: its status, the one-line reason and the full diagnosis, from how its last attempt
ended (pure: read from the hosts' files, nothing written)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...contract import MLPaths
from ..toolkit import records
from ..toolkit.attempt.loop import LoopEnd
from ..toolkit.diagnosis import describe_failure, describe_stop, early_exits, read_failures, stop_reason
from ..toolkit.restart_policy import Cause
from ..toolkit.supervisor import Outcome


@dataclass(frozen=True)
class FinalWords:
    status: str
    reason: str | None
    diagnosis: str


def final_words(outcome: Outcome, end: LoopEnd, hosts: dict[str, MLPaths], logs: dict[str, Path], *, status: str,
                reason: str, failure: tuple[str, str] | None, rank_hosts: dict[int, str],
                stopping_ns: int | None) -> FinalWords:
    """`status`/`reason`: the outcome's, or what packing the outputs changed them to; `failure`: the (reason,
    diagnosis) read when the attempt ended; `stopping_ns`: when the job began to stop its ranks (early exits)."""
    if end.ended.cause is Cause.HANG:  # the reason names the monitor and each rank's stack already
        diagnosis = describe_stop(reason, logs, outcome.stacks)
    elif outcome.status == records.FAILED:
        reason, diagnosis = failure or describe_failure(
            {h: p.failure_json_file for h, p in hosts.items()}, logs, outcome.first_failure)
    elif outcome.status in (records.STOPPED, records.MAX_RUNTIME_EXCEEDED):
        diagnosis = describe_stop(reason, logs, outcome.stacks)
        reason = stop_reason(reason, outcome.stacks)
    else:
        diagnosis = reason
    if outcome.status != records.COMPLETED:
        early = _early_exits(outcome, hosts, rank_hosts, stopping_ns)
        if early:  # a rank that left while the others still ran: what they were likely waiting for
            reason = f"{reason}; {'; '.join(early)}" if reason else "; ".join(early)
            diagnosis = f"{diagnosis}\n" + "\n".join(early)
    if end.stopped is not None:  # stopped between attempts: Stopped, and how the last attempt that ran ended
        status = records.STOPPED
        reason = f"{end.stopped}; attempt {end.attempt}: {reason or end.ended.cause.value}"
        diagnosis = f"{end.stopped}\nattempt {end.attempt}: {diagnosis}"
    elif end.restart_error is not None:  # the policy said retry, but the next attempt could not start
        status = records.FAILED
        reason = f"{reason or end.ended.cause.value}; {end.restart_error}"
        diagnosis = f"{diagnosis}\n{end.restart_error}"
    return FinalWords(status, reason or None, diagnosis)


def _early_exits(outcome: Outcome, hosts: dict[str, MLPaths], rank_hosts: dict[int, str],
                 stopping_ns: int | None) -> list[str]:
    """Ranks that exited 0 before the job began to fail or was stopped, while others still ran."""
    before = stopping_ns
    if outcome.status == records.FAILED:
        times = [int(f["time"]) for f in read_failures({h: p.failure_json_file for h, p in hosts.items()})
                 if f.get("time")]
        if outcome.first_failure is not None:
            times.append(int(outcome.first_failure.wall_time * 1e9))
        before = min(times, default=before)
    return early_exits({h: p.run_dir / "stacks" for h, p in hosts.items()}, rank_hosts, before)
