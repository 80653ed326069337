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
from ..toolkit import records
from ..toolkit.diagnosis import describe_failure, describe_stop
from ..toolkit.jobdir import JobDir
from ..toolkit.outputs import collect_outputs, save_checkpoints
from .attempts import SlurmAttempts, first_exit

_LOCK = ".finishing"


def host_paths(job: JobDir, plan: LaunchPlan) -> dict[str, MLPaths]:
    return {h: MLPaths(job.host_root(h)) for h in plan.host_names}


def finalize(job: JobDir, status: str, reason: str = "") -> records.JobRecord:
    """Finalise the record once; later calls return the record as the first one left it."""
    record = records.JobRecord.load(job.record_file)
    if record.status in records.FINAL_STATUSES:
        return record
    try:
        fd = os.open(job.root / _LOCK, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return record  # another finisher is at work: its record will say the end
    os.close(fd)
    plan = LaunchPlan.from_json(job.plan_file.read_text())
    hosts = host_paths(job, plan)
    for paths in hosts.values():  # a runtime killed before it could take its secrets out
        scrub_host_secrets(paths)
    record.enter_phase("uploading")
    record.save(job.record_file)
    try:
        record.model_data, record.output_data = collect_outputs(plan, hosts, job.output_dir)
        save_checkpoints(plan, hosts)
    except Exception as exc:  # noqa: BLE001 - an upload failure fails the job, with the reason
        if status == records.COMPLETED:
            status, reason = records.FAILED, f"uploading outputs failed: {exc}"
    logs = {h: job.log_file(h) for h in plan.host_names}
    diagnosis = reason
    if status == records.FAILED and not reason.startswith("uploading"):
        reason, diagnosis = describe_failure({h: p.failure_json_file for h, p in hosts.items()},
                                             logs, first_exit(job))
    elif status in (records.STOPPED, records.MAX_RUNTIME_EXCEEDED):
        diagnosis = describe_stop(reason, logs)
    record.backend_info = {**record.backend_info, "diagnosis": diagnosis}
    record.finish(status, reason or None)
    record.save(job.record_file)
    return record


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    job, code = JobDir(Path(args[0])), int(args[1])
    code, _ = SlurmAttempts(job).run(code)  # the restart policy may run more attempts in this allocation first
    status = records.COMPLETED if code == 0 else records.FAILED
    finalize(job, status, "" if code == 0 else f"the srun step exited with code {code}")
    return code


if __name__ == "__main__":
    sys.exit(main())
