"""Re-attach to a training job by name: its TrainingJob, and the estimator arguments its description stands for
(what `PyTorch.attach(job_name)` rebuilds, like the SDK's attach)."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .aws import AwsClients, resolve_region
from .job import TrainingJob, _say
from .request import LAUNCHER_ENV

_SUBMIT = "sagemaker_submit_directory"


def checked_clients(region: str | None) -> AwsClients:
    """Clients of the region, with the credentials checked once (STS): a machine without usable credentials gets
    AwsSetupError's one line instead of botocore's NoCredentialsError traceback on the first SageMaker call."""
    clients = AwsClients(resolve_region(region))
    clients.caller()
    return clients


def attach_job(job_name: str, region: str | None = None, emit: Callable[[str], None] = _say) -> TrainingJob:
    """The job, described once (a job name SageMaker does not know raises botocore's ClientError)."""
    job = TrainingJob(checked_clients(region), job_name, emit=emit)
    description = job.describe()
    job.submit_directory = _decoded(description.get("HyperParameters", {}).get(_SUBMIT))
    return job


def _decoded(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value  # a hyperparameter sent by another client without JSON encoding


def _distribution(hps: dict[str, Any]) -> dict[str, Any] | None:
    """The distribution the sagemaker_* hyperparameters were written for."""
    dist: dict[str, Any] = {}
    mp = hps.get("mp_parameters")
    if hps.get("sagemaker_torch_distributed_enabled"):
        dist["torch_distributed"] = {"enabled": True}
    if hps.get("sagemaker_pytorch_ddp_enabled"):
        dist["pytorchddp"] = {"enabled": True}
    if hps.get("sagemaker_distributed_dataparallel_enabled"):
        dist["smdistributed"] = {"dataparallel": {"enabled": True}}
    elif mp is not None:
        dist["smdistributed"] = {"modelparallel": {"enabled": True, "parameters": mp}}
    if hps.get("sagemaker_mpi_enabled"):
        dist["mpi"] = {"enabled": True, "custom_mpi_options": hps.get("sagemaker_mpi_custom_mpi_options", "")}
        if hps.get("sagemaker_mpi_num_of_processes_per_host"):
            dist["mpi"]["processes_per_host"] = hps["sagemaker_mpi_num_of_processes_per_host"]
    if hps.get("sagemaker_parameter_server_enabled"):
        dist["parameter_server"] = {"enabled": True}
    if hps.get("sagemaker_multi_worker_mirrored_strategy_enabled"):
        dist["multi_worker_mirrored_strategy"] = {"enabled": True}
    groups = hps.get("sagemaker_distribution_instance_groups")
    if dist and isinstance(groups, list) and groups:  # a heterogeneous cluster: the group the strategy runs on
        dist["instance_groups"] = groups
    return dist or None


def attached_arguments(description: dict[str, Any]) -> dict[str, Any]:
    """Estimator keyword arguments for the job a DescribeTrainingJob answer describes (image_uri as sent, so no
    version rule applies; source_dir is the uploaded archive)."""
    hps = {k: _decoded(v) for k, v in (description.get("HyperParameters") or {}).items()}
    resources = description.get("ResourceConfig") or {}
    args: dict[str, Any] = {
        "entry_point": hps.get("sagemaker_program"),
        "source_dir": hps.get(_SUBMIT) if str(hps.get(_SUBMIT, "")).startswith("s3://") else None,
        "role": description.get("RoleArn"),
        "image_uri": (description.get("AlgorithmSpecification") or {}).get("TrainingImage"),
        "output_path": (description.get("OutputDataConfig") or {}).get("S3OutputPath"),
        # CompressionType NONE: model and output delivered as folders (backends/toolkit/output_settings.py)
        "disable_output_compression": (description.get("OutputDataConfig") or {}).get("CompressionType") == "NONE"
        or None,
        "max_run": (description.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds"),
        "volume_size": resources.get("VolumeSizeInGB"),
        "hyperparameters": {k: v for k, v in hps.items()
                            if not k.startswith("sagemaker_") and k not in ("mp_parameters", "model_dir")},
        "environment": {k: v for k, v in (description.get("Environment") or {}).items() if k not in LAUNCHER_ENV},
        "distribution": _distribution(hps),
        # how failures are survived: retries, spot, checkpoints synced between attempts
        "max_retry_attempts": (description.get("RetryStrategy") or {}).get("MaximumRetryAttempts"),
        "use_spot_instances": bool(description.get("EnableManagedSpotTraining")) or None,
        "max_wait": (description.get("StoppingCondition") or {}).get("MaxWaitTimeInSeconds"),
        "checkpoint_s3_uri": (description.get("CheckpointConfig") or {}).get("S3Uri"),
        "checkpoint_local_path": (description.get("CheckpointConfig") or {}).get("LocalPath"),
        # the regexes the job's metrics come from (serve runs them on the local job; attach keeps them, as the SDK's)
        "metric_definitions": (description.get("AlgorithmSpecification") or {}).get("MetricDefinitions"),
    }
    if resources.get("InstanceGroups"):
        args["instance_groups"] = [{"instance_group_name": g["InstanceGroupName"], "instance_type": g["InstanceType"],
                                    "instance_count": g["InstanceCount"]} for g in resources["InstanceGroups"]]
    else:
        args.update(instance_type=resources.get("InstanceType"), instance_count=resources.get("InstanceCount"))
    return {k: v for k, v in args.items() if v not in (None, {}, [])}
