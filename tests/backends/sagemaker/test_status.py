"""DescribeTrainingJob answers → result or JobFailedError. Pure."""
from __future__ import annotations

import pytest

from smdist_launcher.backends.sagemaker.logs import host_of
from smdist_launcher.backends.sagemaker.status import check_outcome, is_terminal, job_from_description
from smdist_launcher.errors import JobFailedError


def _describe(status: str, **extra) -> dict:
    return {"TrainingJobName": "job-1", "TrainingJobStatus": status, "TrainingJobArn": "arn:job", **extra}


def test_completed_gives_model_data() -> None:
    job = check_outcome(job_from_description(
        _describe("Completed", ModelArtifacts={"S3ModelArtifacts": "s3://out/job-1/output/model.tar.gz"}), "us-west-2"))
    assert (job.status, job.model_data, job.arn) == ("Completed", "s3://out/job-1/output/model.tar.gz", "arn:job")


@pytest.mark.parametrize("status, reason, shown", [
    ("Failed", "AlgorithmError: ExecuteUserScriptError: exit code 1", "AlgorithmError: ExecuteUserScriptError"),
    ("Stopped", None, "stopped before it completed"),
])
def test_failed_and_stopped_raise(status: str, reason: str | None, shown: str) -> None:
    extra = {"FailureReason": reason} if reason else {}
    with pytest.raises(JobFailedError) as info:
        check_outcome(job_from_description(_describe(status, **extra), "us-west-2"))
    assert info.value.status == status and shown in info.value.diagnosis
    assert "/aws/sagemaker/TrainingJobs/job-1" in str(info.value)


def test_terminal_states_and_stream_hosts() -> None:
    assert [is_terminal(_describe(s)) for s in ("InProgress", "Stopping", "Completed", "Failed", "Stopped")] == \
        [False, False, True, True, True]
    assert host_of("job-1/algo-12-1700000000") == "algo-12" and host_of("job-1/custom") == "custom"


def test_a_sagemaker_record_holds_a_phase_and_sagemakers_secondary_status(tmp_path) -> None:
    """A sagemaker job's record: `phase` a Phase mapped from SageMaker's SecondaryStatus, kept in its own field;
    describe shows SageMaker's word, as describing by name does."""
    from smdist_launcher.backends.api import JobHandle, JobState
    from smdist_launcher.backends.phases import Phase
    from smdist_launcher.backends.sagemaker.backend import SageMakerBackend, _apply
    from smdist_launcher.backends.toolkit.jobdir import JobDir
    from smdist_launcher.backends.toolkit.records import JobRecord

    job_dir = JobDir.create(tmp_path, "job-1")
    record = JobRecord(job_name="job-1", job_id="job-1", job_dir=str(job_dir.root), backend="sagemaker",
                       launcher_pid=0)
    _apply(record, _describe("InProgress", SecondaryStatus="Downloading"))
    assert (record.phase, record.secondary_status) == (Phase.STAGING, "Downloading")
    _apply(record, _describe("Completed", SecondaryStatus="Completed"))
    assert (record.status, record.phase, record.secondary_status) == (JobState.COMPLETED, Phase.DONE, "Completed")
    record.save(job_dir.record_file)
    again = JobRecord.load(job_dir.record_file)
    assert again.phase is Phase.DONE and set(again.phases) == {"staging", "done"}
    status = SageMakerBackend().describe(JobHandle(backend="sagemaker", job_name="job-1", job_dir=str(job_dir.root)))
    assert (status.state, status.phase) == (JobState.COMPLETED, "Completed")
