"""The CreateTrainingJob key each job-spec argument comes from: the job-spec rules name estimator arguments
(checkpoint_local_path) and container-command fields (job_name); serve's caller sent request keys
(CheckpointConfig.LocalPath), and its ValidationException names those."""
from __future__ import annotations

from ..errors import ErrorItem, ValidationError

# job-spec argument or ContainerCommandJob field → the request's key path
REQUEST_KEYS = {
    "job_name": "TrainingJobName",
    "base_job_name": "TrainingJobName",
    "entry_point": "HyperParameters.sagemaker_program",
    "source_dir": "HyperParameters.sagemaker_submit_directory",
    "entrypoint": "AlgorithmSpecification.ContainerEntrypoint",
    "arguments": "AlgorithmSpecification.ContainerArguments",
    "image": "AlgorithmSpecification.TrainingImage",
    "image_uri": "AlgorithmSpecification.TrainingImage",
    "metric_definitions": "AlgorithmSpecification.MetricDefinitions",
    "role": "RoleArn",
    "inputs": "InputDataConfig",
    "output_path": "OutputDataConfig.S3OutputPath",
    "instance_type": "ResourceConfig.InstanceType",
    "instance_count": "ResourceConfig.InstanceCount",
    "instance_groups": "ResourceConfig.InstanceGroups",
    "volume_size": "ResourceConfig.VolumeSizeInGB",
    "max_run": "StoppingCondition.MaxRuntimeInSeconds",
    "max_wait": "StoppingCondition.MaxWaitTimeInSeconds",
    "hyperparameters": "HyperParameters",
    "environment": "Environment",
    "checkpoint_s3_uri": "CheckpointConfig.S3Uri",
    "checkpoint_local_path": "CheckpointConfig.LocalPath",
    "max_retry_attempts": "RetryStrategy.MaximumRetryAttempts",
    "use_spot_instances": "EnableManagedSpotTraining",
}


def request_key(path: str) -> str:
    """'checkpoint_local_path' → 'CheckpointConfig.LocalPath'; 'environment.X' → 'Environment.X'; others as given."""
    for sep in (".", "["):
        head, found, rest = path.partition(sep)
        if found and head in REQUEST_KEYS:
            return REQUEST_KEYS[head] + sep + rest
    return REQUEST_KEYS.get(path, path)


def in_request_keys(exc: ValidationError) -> ValidationError:
    """The same problems, each under the request key it came from."""
    return ValidationError([ErrorItem(request_key(e.path), e.message, e.value) if e.has_value
                            else ErrorItem(request_key(e.path), e.message) for e in exc.errors], exc.source)
