"""The ``sagemaker_*`` hyperparameters the SDK adds for a job (sagemaker-python-sdk v2
``Framework._script_mode_hyperparam_update``, ``_distribution_configuration`` and
``PyTorch._pytorch_distribution_configuration``); the container picks its runner from them.

Differences from the SDK, on purpose:
- ``sagemaker_mpi_num_of_processes_per_host`` is always written for MPI strategies (the SDK writes it only when the
  user gave it), and for other strategies when the resolved count differs from the instance's default (GPUs, else
  Neuron cores, else 1), so the container would start exactly the processes the plan shows.
- ``pytorchddp`` keeps its own flag (``sagemaker_pytorch_ddp_enabled``) instead of being rewritten to smdistributed.
- ``sagemaker_submit_directory`` is the source_dir as given (a local folder or an s3:// URI), since planning uploads
  nothing.
- ``sagemaker_distribution_instance_groups`` is written for every strategy of a job given by instance_groups (the SDK
  leaves it out next to torch_distributed, and the container could not tell which group runs torchrun), and
  ``sagemaker_instance_type`` is the distribution group's type (the SDK sends null when there are instance groups).
"""
from __future__ import annotations

from typing import Any

from ..jobspec.resolved import ResolvedJob

CONTAINER_LOG_LEVEL = 20  # logging.INFO, the SDK's default
CODE_DIR = "/opt/ml/code"

_MPI_STRATEGIES = frozenset({"mpi", "smp_v1"})


def _instance_default_processes(job: ResolvedJob) -> int:
    return job.instance.gpus or job.instance.neuron_cores or 1


def _script_mode(job: ResolvedJob) -> dict[str, Any]:
    params: dict[str, Any] = {
        "sagemaker_program": job.entry_point,
        "sagemaker_submit_directory": job.source_dir or CODE_DIR,
        "sagemaker_container_log_level": CONTAINER_LOG_LEVEL,
        "sagemaker_job_name": job.job_name,
    }
    if job.region:
        params["sagemaker_region"] = job.region
    return params


def _distribution(job: ResolvedJob) -> dict[str, Any]:
    s = job.strategy
    params: dict[str, Any] = {}
    if s in _MPI_STRATEGIES:
        params["sagemaker_mpi_enabled"] = True
        params["sagemaker_mpi_custom_mpi_options"] = job.custom_mpi_options
    if s in _MPI_STRATEGIES or job.processes_per_host != _instance_default_processes(job):
        params["sagemaker_mpi_num_of_processes_per_host"] = job.processes_per_host
    if s in ("smp_v1", "smp_v2", "smddp"):
        # The SDK writes this for any smdistributed strategy: false for modelparallel.
        params["sagemaker_distributed_dataparallel_enabled"] = s == "smddp"
        params["sagemaker_instance_type"] = job.instance_type
    if s == "smddp":
        params["sagemaker_distributed_dataparallel_custom_mpi_options"] = job.custom_mpi_options
    if s == "pytorchddp":
        params["sagemaker_pytorch_ddp_enabled"] = True
        params["sagemaker_instance_type"] = job.instance_type
        if job.custom_mpi_options:
            params["sagemaker_distributed_dataparallel_custom_mpi_options"] = job.custom_mpi_options
    if s in ("torch_distributed", "smp_v2"):
        params["sagemaker_torch_distributed_enabled"] = True
        params["sagemaker_instance_type"] = job.instance_type
    if s == "parameter_server":
        params["sagemaker_parameter_server_enabled"] = True
    if s == "multi_worker_mirrored_strategy":
        params["sagemaker_multi_worker_mirrored_strategy_enabled"] = True
    groups = [g.name for g in job.instance_groups if g.distribution]
    if groups:
        params["sagemaker_distribution_instance_groups"] = groups
    return params


def framework_hyperparameters(job: ResolvedJob) -> dict[str, Any]:
    """Unencoded ``sagemaker_*`` keys for this job."""
    return {**_script_mode(job), **_distribution(job)}


def tensorflow_model_dir(job: ResolvedJob) -> str:
    """The ``model_dir`` hyperparameter the TensorFlow estimator adds (SDK: /opt/ml/model under MPI, else under
    output_path on S3)."""
    if job.strategy not in _MPI_STRATEGIES and job.output_path and job.output_path.startswith("s3://"):
        return f"{job.output_path.rstrip('/')}/{job.job_name}/model"
    return "/opt/ml/model"
