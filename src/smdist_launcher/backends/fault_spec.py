"""What `--inject FAULT@SECONDS` says, parsed and checked (stdlib only): beside the job states and phases, so the run
policy (api.RunPolicy) holds typed faults; toolkit/faults.py fires them."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, cast

FaultKind = Literal["kill-host", "kill-rank", "hang-rank", "preempt"]
_FAULT = re.compile(r"^(?P<kind>kill-host|kill-rank|hang-rank|preempt)(?::(?P<target>[A-Za-z0-9_-]+))?"
                    r"@(?P<at>\d+(?:\.\d+)?)$")
EXAMPLES = "kill-host:algo-2@30, kill-rank:3@45, hang-rank:0@60, preempt@90"


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    target: str | None
    at_s: float

    def __str__(self) -> str:
        return f"{self.kind}{':' + self.target if self.target else ''}@{self.at_s:g}"


def parse_fault(text: str) -> Fault:
    """ValueError saying what is allowed for anything else."""
    found = _FAULT.match(text.strip())
    if found is None:
        raise ValueError(f"{text!r} is not FAULT@SECONDS; FAULT is kill-host:algo-N, kill-rank:R, hang-rank:R or "
                         f"preempt (e.g. {EXAMPLES})")
    kind, target = found["kind"], found["target"]
    if kind == "preempt" and target:
        raise ValueError(f"{text!r}: preempt takes no target (it interrupts every host)")
    if kind == "kill-host" and not (target and re.fullmatch(r"algo-\d+", target)):
        raise ValueError(f"{text!r}: kill-host needs a host name, e.g. kill-host:algo-2@30")
    if kind in ("kill-rank", "hang-rank") and not (target and target.isdigit()):
        raise ValueError(f"{text!r}: {kind} needs a rank number, e.g. {kind}:1@30")
    return Fault(cast(FaultKind, kind), target, float(found["at"]))


def check_targets(faults: list[Fault], hosts: list[str], world_size: int) -> list[str]:
    """What names a host or rank this job does not have (one line each)."""
    problems = []
    for f in faults:
        if f.kind == "kill-host" and f.target not in hosts:
            problems.append(f"{f}: the job's hosts are {', '.join(hosts)}")
        if f.kind in ("kill-rank", "hang-rank") and f.target is not None and int(f.target) >= world_size:
            problems.append(f"{f}: the job's ranks are 0-{world_size - 1}")
    return problems
