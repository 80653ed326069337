"""SageMaker's SecondaryStatus values that DescribeTrainingJob's SecondaryStatusTransitions list: what a local job's
phase (backends.phases.Phase) and final state (backends.api.JobState) look like through SageMaker's API."""
from __future__ import annotations

from enum import Enum

from .phases import Phase
from .states import JobState


class SecondaryStatus(str, Enum):
    STARTING = "Starting"
    DOWNLOADING = "Downloading"
    TRAINING = "Training"
    UPLOADING = "Uploading"
    STOPPING = "Stopping"
    COMPLETED = "Completed"
    FAILED = "Failed"
    STOPPED = "Stopped"
    MAX_RUNTIME_EXCEEDED = "MaxRuntimeExceeded"
    # only SageMaker says these (its DescribeTrainingJob's SecondaryStatus); a sagemaker job's record maps them too
    PENDING = "Pending"
    LAUNCHING_ML_INSTANCES = "LaunchingMLInstances"
    PREPARING_TRAINING_STACK = "PreparingTrainingStack"
    DOWNLOADING_TRAINING_IMAGE = "DownloadingTrainingImage"
    RESTARTING = "Restarting"
    UPDATING = "Updating"
    INTERRUPTED = "Interrupted"
    MAX_WAIT_TIME_EXCEEDED = "MaxWaitTimeExceeded"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


# a local job's phase -> the secondary status and its message (keyed by str: a phase read back from job.json finds its
# entry)
OF_PHASE: dict[str, tuple[SecondaryStatus, str]] = {
    Phase.CREATED: (SecondaryStatus.STARTING, "Preparing the instances for training"),
    Phase.STAGING: (SecondaryStatus.DOWNLOADING, "Downloading input data and the training code"),
    Phase.STARTING: (SecondaryStatus.TRAINING, "Starting the training processes on every host"),
    Phase.RUNNING: (SecondaryStatus.TRAINING, "Training image download completed. Training in progress."),
    Phase.UPLOADING: (SecondaryStatus.UPLOADING, "Uploading generated training model"),
}
# a local job's final state -> the last secondary status and its message
OF_FINAL_STATE: dict[str, tuple[SecondaryStatus, str]] = {
    JobState.COMPLETED: (SecondaryStatus.COMPLETED, "Training job completed"),
    JobState.FAILED: (SecondaryStatus.FAILED, "Training job failed"),
    JobState.STOPPED: (SecondaryStatus.STOPPED, "The job was stopped"),
    JobState.MAX_RUNTIME_EXCEEDED: (SecondaryStatus.MAX_RUNTIME_EXCEEDED, "The job reached its MaxRuntimeInSeconds"),
    JobState.INTERRUPTED: (SecondaryStatus.FAILED, "Training job failed: its launcher died before it ended"),
}

# SageMaker's secondary status -> the phase a sagemaker job's record holds (its SecondaryStatus kept beside it)
PHASE_OF: dict[SecondaryStatus, Phase] = {
    SecondaryStatus.PENDING: Phase.QUEUED,
    SecondaryStatus.STARTING: Phase.STARTING,
    SecondaryStatus.LAUNCHING_ML_INSTANCES: Phase.STARTING,
    SecondaryStatus.PREPARING_TRAINING_STACK: Phase.STARTING,
    SecondaryStatus.DOWNLOADING: Phase.STAGING,
    SecondaryStatus.DOWNLOADING_TRAINING_IMAGE: Phase.STAGING,
    SecondaryStatus.TRAINING: Phase.RUNNING,
    SecondaryStatus.RESTARTING: Phase.RUNNING,
    SecondaryStatus.UPDATING: Phase.RUNNING,
    SecondaryStatus.STOPPING: Phase.RUNNING,
    SecondaryStatus.UPLOADING: Phase.UPLOADING,
    SecondaryStatus.COMPLETED: Phase.DONE,
    SecondaryStatus.FAILED: Phase.DONE,
    SecondaryStatus.STOPPED: Phase.DONE,
    SecondaryStatus.MAX_RUNTIME_EXCEEDED: Phase.DONE,
    SecondaryStatus.INTERRUPTED: Phase.DONE,
    SecondaryStatus.MAX_WAIT_TIME_EXCEEDED: Phase.DONE,
}


def phase_of_secondary(value: str | None) -> Phase | None:
    """The phase of SageMaker's SecondaryStatus `value`; None for a value SageMaker added since (the caller keeps
    what it had)."""
    try:
        return PHASE_OF[SecondaryStatus(value)]
    except ValueError:
        return None
