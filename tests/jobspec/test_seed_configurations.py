"""Every distribution configuration of the seed documents validates (and so does every example job file)."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from smdist_launcher.jobspec import load_job_file, resolve, validate_args

P4D = {"instance_type": "ml.p4d.24xlarge", "instance_count": 2}
MPI_8 = {"enabled": True, "processes_per_host": 8, "custom_mpi_options": "--mca btl_vader_single_copy_mechanism none "}
SMP_V1 = {"instance_type": "ml.p3.16xlarge", "instance_count": 1, "framework_version": "1.13.1", "py_version": "py36",
          "base_job_name": "SMD-MP-demo"}
IMAGE = "123456789012.dkr.ecr.us-west-2.amazonaws.com/smp:1"

SEEDS: dict[str, tuple[str, dict[str, Any], str]] = {
    "smddp_p4d": ("pytorch", {**P4D, "distribution": {"smdistributed": {"dataparallel": {"enabled": True}}}}, "smddp"),
    "pytorchddp": ("pytorch", {**P4D, "distribution": {"pytorchddp": {"enabled": True}}}, "pytorchddp"),
    "torch_distributed": ("pytorch", {**P4D, "distribution": {"torch_distributed": {"enabled": True}}},
                          "torch_distributed"),
    "smp_framework": ("framework", {**P4D, "image_uri": IMAGE, "distribution": {
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": {}}}, "mpi": {"enabled": True}}}, "smp_v1"),
    "smp_v1_tp4": ("pytorch", {**SMP_V1, "distribution": {"mpi": MPI_8, "smdistributed": {"modelparallel": {
        "enabled": True, "parameters": {"pipeline_parallel_degree": 1, "placement_strategy": "cluster",
                                        "tensor_parallel_degree": 4, "ddp": True}}}}}, "smp_v1"),
    "smp_v1_tp2_pp2": ("pytorch", {**SMP_V1, "distribution": {"mpi": MPI_8, "smdistributed": {"modelparallel": {
        "enabled": True, "parameters": {"microbatches": 4, "pipeline_parallel_degree": 2,
                                        "placement_strategy": "cluster",
                                        "tensor_parallel_degree": 2, "ddp": True}}}}}, "smp_v1"),
    "smp_v2": ("pytorch", {**P4D, "distribution": {"torch_distributed": {"enabled": True},
                                                   "smdistributed": {"modelparallel": {
        "enabled": True, "parameters": {"tensor_parallel_degree": 8, "hybrid_shard_degree": 1}}}}}, "smp_v2"),
    "smp_v2_smddp": ("pytorch", {**P4D, "distribution": {"torch_distributed": {"enabled": True},
                                                         "smdistributed": {"modelparallel": {
        "enabled": True, "parameters": {"hybrid_shard_degree": 16, "sm_activation_offloading": True,
                                        "activation_loading_horizon": 2}}}}}, "smp_v2"),
    "mpi_pytorch": ("pytorch", {**P4D, "distribution": {"mpi": {"enabled": True}}}, "mpi"),
    "mpi_tensorflow": ("tensorflow", {**P4D, "framework_version": "2.13", "distribution": {"mpi": {"enabled": True}}},
                       "mpi"),
    "parameter_server_tf": ("tensorflow", {**P4D, "framework_version": "2.13",
                                           "distribution": {"parameter_server": {"enabled": True}}},
                            "parameter_server"),
    "parameter_server_mxnet": ("mxnet", {**P4D, "framework_version": "1.9",
                                         "distribution": {"parameter_server": {"enabled": True}}}, "parameter_server"),
    "trn1": ("pytorch", {"instance_type": "ml.trn1.32xlarge", "instance_count": 2, "framework_version": "1.13.1",
                         "distribution": {"torch_distributed": {"enabled": True}}}, "torch_distributed"),
}


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_validates(name: str, args: dict[str, Any]) -> None:
    framework, extra, strategy = SEEDS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the seeds are clean: not even a warning
        spec = validate_args(framework, {**args, **extra})
    assert resolve(spec).strategy == strategy


EXAMPLES = sorted(Path(__file__).resolve().parents[2].glob("examples/*/job*.yaml"))


@pytest.mark.skipif(not EXAMPLES, reason="no example job files yet")
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_example_job_files_validate(path: Path) -> None:
    job = resolve(load_job_file(path))
    assert job.instance_count >= 1 and job.processes_per_host >= 1
