"""A training job on SageMaker (or anything that speaks its API, e.g. `smdist serve`): describe, wait, stop, logs.

What `fit(wait=False)` returns and `est.latest_training_job` holds; `attach()` makes one from a job name.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from ..api import JobHandle, JobState
from .aws import AwsClients
from .logs import LogTail
from .progress import Progress
from .status import SageMakerJob, check_outcome, is_terminal, job_from_description

POLL_ENV = "SMDIST_SAGEMAKER_POLL_S"


def poll_interval(explicit: float | None, logs: bool) -> float:
    if explicit is not None:
        return explicit
    if os.environ.get(POLL_ENV):
        return float(os.environ[POLL_ENV])
    return 10.0 if logs else 5.0  # the SDK's intervals


def _say(line: str) -> None:
    print(line, file=sys.stdout, flush=True)


def logs_enabled(logs: Any) -> bool:
    """The SDK's `logs` argument: True/"All" stream CloudWatch logs, False/None/"None" do not."""
    return logs not in (False, None, "None")


class TrainingJob:
    """A submitted training job. Attributes come from the last DescribeTrainingJob answer."""

    def __init__(self, clients: AwsClients, job_name: str, *, arn: str | None = None,
                 submit_directory: str | None = None, emit: Callable[[str], None] = _say) -> None:
        self.clients = clients
        self.job_name = job_name
        self.submit_directory = submit_directory
        self._emit = emit
        self.handle = JobHandle(backend="sagemaker", job_name=job_name, region=clients.region)
        self._last: dict[str, Any] = {"TrainingJobName": job_name, "TrainingJobStatus": JobState.IN_PROGRESS,
                                      **({"TrainingJobArn": arn} if arn else {})}

    # ---- what the last answer said -----------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.job_name

    @property
    def region(self) -> str:
        return self.clients.region

    def snapshot(self) -> SageMakerJob:
        return job_from_description(self._last, self.clients.region, self.submit_directory)

    @property
    def status(self) -> str:
        return self._last["TrainingJobStatus"]

    @property
    def secondary_status(self) -> str | None:
        return self._last.get("SecondaryStatus")

    @property
    def arn(self) -> str | None:
        return self._last.get("TrainingJobArn")

    @property
    def model_data(self) -> str | None:
        return self.snapshot().model_data

    @property
    def failure_reason(self) -> str | None:
        return self._last.get("FailureReason")

    @property
    def console_url(self) -> str:
        return self.snapshot().console_url

    # ---- calls ---------------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """DescribeTrainingJob, now."""
        self._last = self.clients.sagemaker.describe_training_job(TrainingJobName=self.job_name)
        return self._last

    def stop(self) -> None:
        """StopTrainingJob; the job then goes Stopping → Stopped."""
        self.clients.sagemaker.stop_training_job(TrainingJobName=self.job_name)
        self._emit(f"[smdist] asked SageMaker to stop {self.job_name}")

    def logs(self, follow: bool = False, interval: float = 5.0) -> None:
        """Print the log lines of every host so far, `[algo-2] ...`; follow=True keeps printing until the job ends."""
        tail = LogTail(self.clients.logs, self.job_name, self._emit)
        while True:
            done = is_terminal(self.describe()) if follow else True
            tail.poll()
            if done:
                tail.poll()
                return
            time.sleep(interval)

    def wait(self, logs: Any = "All", interval: float | None = None, live: bool | None = None) -> TrainingJob:
        """Wait until the job ends, showing its status transitions (a live line on a terminal, plain lines
        otherwise) and every host's log lines unless logs=False/"None". Returns the job when it completed;
        raises JobFailedError with SageMaker's FailureReason otherwise."""
        show_logs = logs_enabled(logs)
        if live is None:
            live = self._emit is _say and sys.stdout.isatty()
        progress = Progress(self.job_name, self._emit, live=live)
        tail = LogTail(self.clients.logs, self.job_name, progress.log_line) if show_logs else None
        period = poll_interval(interval, show_logs)
        try:
            while True:
                description = self.describe()
                progress.update(description)
                if tail:
                    tail.poll()
                if is_terminal(description):
                    break
                time.sleep(period)
            if tail:
                tail.poll()  # lines written between the last poll and the end
        except KeyboardInterrupt:
            progress.close()
            self._emit(f"[smdist] stopped waiting; {self.job_name} keeps running. "
                       f"Stop it with: smdist stop {self.job_name}")
            raise
        progress.close()
        check_outcome(self.snapshot())
        return self

    def __repr__(self) -> str:
        return f"TrainingJob({self.job_name!r}, status={self.status!r}, region={self.region!r})"
