"""The Slurm commands the backend uses (sbatch, squeue, scontrol, sacct, scancel), each with a timeout and a
clear error: a missing client names the other backends, a refusal quotes Slurm and says what to change."""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from ..states import JobState

TIMEOUT_S = 60
# Slurm job states that end a job (squeue/scontrol/sacct spellings) → SageMaker's TrainingJobStatus.
FINAL_STATES: dict[str, JobState] = {
    "COMPLETED": JobState.COMPLETED,
    "CANCELLED": JobState.STOPPED,
    "TIMEOUT": JobState.MAX_RUNTIME_EXCEEDED,
    "DEADLINE": JobState.MAX_RUNTIME_EXCEEDED,
    "FAILED": JobState.FAILED,
    "NODE_FAIL": JobState.FAILED,
    "OUT_OF_MEMORY": JobState.FAILED,
    "BOOT_FAIL": JobState.FAILED,
    "PREEMPTED": JobState.FAILED,
}
# What to change when sbatch refuses a job, by the words of its message.
_HINTS = (
    ("invalid partition", "pick a partition that exists (`sinfo -s` lists them) with --partition"),
    ("time limit", "ask for less time with --time, or a partition with a longer MaxTime (`sinfo -o '%P %l'`)"),
    ("node count", "the job needs one node per host: lower instance_count or use a partition with more nodes"),
    ("requested node configuration is not available",
     "no node offers what the job asks (nodes, GPUs per node): check `sinfo -N -l` and --gpus-per-node"),
    ("invalid account", "pass an account you may charge with --account (`sacctmgr show assoc user=$USER`)"),
    ("invalid qos", "pass a QOS your account may use with --qos"),
)


# Reasons a PENDING job will never start on its own (Slurm accepts such jobs unless EnforcePartLimits is set).
HOPELESS_PENDING = {
    "PartitionTimeLimit": "ask for less time with --time (or a shorter max_run), or a partition with a longer MaxTime",
    "PartitionNodeLimit": "the job needs one node per host: lower instance_count or use a partition with more nodes",
    "PartitionConfig": "the partition cannot hold the job as asked (one node per host, GPUs per node): lower "
                       "instance_count, or pick a larger partition with --partition (`sinfo -s`)",
    "BadConstraints": "no node offers what the job asks (GPUs per node, features): check `sinfo -N -l`",
    "InvalidAccount": "pass an account you may charge with --account",
    "InvalidQOS": "pass a QOS your account may use with --qos",
    "QOSMaxWallDurationPerJobLimit": "ask for less time with --time: the QOS caps a job's wall time",
    "AssocMaxWallDurationPerJobLimit": "ask for less time with --time: your association caps a job's wall time",
}


def hopeless(state: SlurmState) -> str | None:
    """A message when the job is PENDING for a reason that never clears by itself, else None."""
    if state.state == "PENDING" and state.reason in HOPELESS_PENDING:
        return (f"the cluster will never start the job (pending: {state.reason})\n"
                f"  fix: {HOPELESS_PENDING[state.reason]}")
    return None


class SlurmError(RuntimeError):
    """Slurm is missing or refused a request; the message says what to do."""


@dataclass(frozen=True)
class SlurmState:
    state: str            # Slurm's word (PENDING, RUNNING, COMPLETED, ...)
    exit_code: str = ""   # "0:0" (code:signal), when known
    reason: str = ""

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def status(self) -> JobState:
        return FINAL_STATES.get(self.state, JobState.IN_PROGRESS)


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise SlurmError(f"`{tool}` was not found on PATH: the slurm backend needs a Slurm client (install Slurm or "
                         "run from a login node of the cluster); to run on this machine instead use "
                         "`--backend local` (simulated hosts as processes)")
    return path


def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    _require(argv[0])
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"`{' '.join(argv[:2])} ...` did not answer within {TIMEOUT_S} s: is slurmctld up "
                         "(`scontrol ping`)?") from None


def submit(script: str, sbatch_args: list[str], env: dict[str, str]) -> str:
    """sbatch the script (on stdin); returns the Slurm job id."""
    _require("sbatch")
    try:
        done = subprocess.run(["sbatch", "--parsable", *sbatch_args], input=script, capture_output=True, text=True,
                              timeout=TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"sbatch did not answer within {TIMEOUT_S} s: is slurmctld up (`scontrol ping`)?") from None
    if done.returncode != 0:
        message = done.stderr.strip() or done.stdout.strip() or f"exit code {done.returncode}"
        hint = next((h for words, h in _HINTS if words in message.lower()), "")
        raise SlurmError(f"the cluster refused the job: {message}" + (f"\n  fix: {hint}" if hint else ""))
    return done.stdout.strip().split(";")[0]


def state(job_id: str) -> SlurmState | None:
    """The job's state: squeue while Slurm holds it, then scontrol (until MinJobAge), then sacct; None if unknown."""
    done = _run(["squeue", "-h", "-j", job_id, "-o", "%T|%r"])
    if done.returncode == 0 and done.stdout.strip():
        word, _, reason = done.stdout.strip().splitlines()[0].partition("|")
        if word not in FINAL_STATES:
            return SlurmState(word, reason=reason)
    done = _run(["scontrol", "show", "job", "-o", job_id])
    if done.returncode == 0 and "JobState=" in done.stdout:
        fields = dict(f.partition("=")[::2] for f in done.stdout.split() if "=" in f)
        return SlurmState(fields.get("JobState", "UNKNOWN"), fields.get("ExitCode", ""), fields.get("Reason", ""))
    if shutil.which("sacct"):
        done = _run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State,ExitCode"])
        line = done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else ""
        if line:
            word, _, code = line.partition("|")
            return SlurmState(word.split()[0], code)
    return None


def cancel(job_id: str) -> None:
    done = _run(["scancel", job_id])
    if done.returncode != 0 and "already completing or completed" not in done.stderr.lower():
        raise SlurmError(f"scancel {job_id} failed: {done.stderr.strip() or done.returncode}")
