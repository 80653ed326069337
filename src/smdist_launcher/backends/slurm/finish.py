"""Closing a Slurm job: outputs packed and delivered, the first failure named, the job record finalised.

Before that, the batch script's call runs the job's further attempts when the restart policy says so
(attempts.py). Whoever sees the end first does it, once (a lock file in the job folder): the batch script right
after its srun step (so a `--no-wait` job is complete without anyone watching), or, when Slurm ended the script itself
(scancel, time limit), the waiting launcher or the next `smdist status/jobs`. Run as
`python -m smdist_launcher.backends.slurm.finish JOB_DIR EXIT_CODE` by the batch script."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ...contract import MLPaths
from ...plan.model import LaunchPlan
from ..local.host_environment import scrub_host_secrets
from ..phases import Phase
from ..toolkit import records
from ..toolkit.attempt.kept_layout import final_trees
from ..toolkit.diagnosis import describe_failure, describe_stop
from ..toolkit.jobdir import JobDir
from ..toolkit.outputs import deliver_job_outputs
from .attempts import SlurmAttempts, first_exit

_LOCK = ".finishing"
_UPLOAD_FAILED = "packing or delivering the outputs failed"


def host_paths(job: JobDir, plan: LaunchPlan) -> dict[str, MLPaths]:
    return {h: MLPaths(job.host_root(h)) for h in plan.host_names}


def finalize(job: JobDir, status: str, reason: str = "", *, attempt: int | None = None,
             diagnosed: bool = False) -> records.JobRecord:
    """Finalise the record once; later calls return the record as the first one left it. `attempt`: pack that
    attempt's trees (kept already when the attempt after it could not start); None: the live ones. `diagnosed`: the
    reason names the failure already."""
    record = records.JobRecord.load(job.record_file)
    if record.status in records.FINAL_STATUSES:
        return record
    try:
        fd = os.open(job.root / _LOCK, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return record  # another finisher is at work: its record will say the end
    os.close(fd)
    plan = LaunchPlan.from_json(job.plan_file.read_text())
    hosts = (final_trees(job, attempt, plan.host_names) if attempt is not None else host_paths(job, plan))
    for paths in hosts.values():  # a runtime killed before it could take its secrets out
        scrub_host_secrets(paths)
    records.update_record(job.record_file, lambda r: r.enter_phase(Phase.UPLOADING))
    delivered = deliver_job_outputs(plan, hosts, job.output_dir)  # checkpoints also when the outputs failed
    model_data, output_data = delivered.model_data, delivered.output_data
    # an upload failure fails the job, with the reason; a stop while packing (scancel's SIGTERM) stops it
    status, reason = delivered.settle(status, reason, _UPLOAD_FAILED)
    logs = {h: job.log_file(h) for h in plan.host_names}
    diagnosis = reason
    if status == records.FAILED and not diagnosed and not reason.startswith(_UPLOAD_FAILED):
        reason, diagnosis = describe_failure({h: p.failure_json_file for h, p in hosts.items()},
                                             logs, first_exit(job))
    elif status in (records.STOPPED, records.MAX_RUNTIME_EXCEEDED):
        diagnosis = describe_stop(reason, logs)

    def close(current: records.JobRecord) -> None:  # on the record as it is now: a refresh's state is kept
        current.model_data, current.output_data = model_data, output_data
        current.backend_info = {**current.backend_info, "diagnosis": diagnosis}
        current.finish(status, reason or None)

    return records.update_record(job.record_file, close)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    job, code = JobDir(Path(args[0])), int(args[1])
    code, end = SlurmAttempts(job).run(code)  # the restart policy may run more attempts in this allocation first
    if end.stopped is not None:  # stopped while the next attempt was prepared: the last attempt's trees, packed
        finalize(job, records.STOPPED, f"{end.stopped}; attempt {end.attempt}: "
                 f"{end.ended.reason or end.ended.cause.value}", attempt=end.attempt, diagnosed=True)
        return code or 1
    if end.restart_error is not None:  # the last attempt's real cause, then why the next one could not start
        finalize(job, records.FAILED, f"{end.ended.reason or end.ended.cause.value}; {end.restart_error}",
                 attempt=end.attempt, diagnosed=True)
        return code or 1
    status = records.COMPLETED if code == 0 else records.FAILED
    finalize(job, status, "" if code == 0 else f"the srun step exited with code {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
