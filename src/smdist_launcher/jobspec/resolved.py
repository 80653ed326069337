"""The boundary between validation (spec/) and planning (plan/).

`spec.resolve()` turns a validated job spec into a `ResolvedJob`: every default
filled, every alias folded, the strategy decided. The planner reads only this.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..contract.hyperparameters import HyperparameterEncoding

Strategy = Literal[
    "single",             # no distribution: python train.py on each host
    "torch_distributed",  # torchrun on every host
    "pytorchddp",         # mpirun (+ smddprun), SageMaker rewrites it to smdistributed.dataparallel
    "smddp",              # smdistributed.dataparallel: mpirun + smddprun
    "smp_v1",             # smdistributed.modelparallel + mpi: mpirun with mp_parameters
    "smp_v2",             # smdistributed.modelparallel + torch_distributed: torchrun with SMP config in env
    "mpi",                # plain mpirun
    "parameter_server",   # TF/MXNet parameter server layout
    "multi_worker_mirrored_strategy",
]


class InstanceInfo(BaseModel):
    """One row of the instance catalog."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    instance_type: str
    gpus: int = 0
    gpu_model: str | None = None
    gpu_memory_gib: float | None = None
    vcpus: int = 0
    memory_gib: float = 0
    efa: bool = False
    efa_rdma: bool = False
    neuron_cores: int = 0
    local: bool = False


class ResolvedInstanceGroup(BaseModel):
    """One instance group of a job given by instance_groups."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    instance_type: str
    instance_count: int
    distribution: bool = False   # its hosts run the distribution's ranks; the other groups' hosts run the script alone


class ResolvedJob(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    framework: Literal["pytorch", "tensorflow", "huggingface", "mxnet", "framework"]
    framework_version: str | None = None
    py_version: str | None = None
    image_uri: str | None = None
    job_name: str
    entry_point: str                      # path relative to source_dir (or basename)
    source_dir: str | None = None
    instance_type: str                    # of the hosts the ranks run on (the distribution's group)
    instance_count: int                   # hosts of that group
    instance: InstanceInfo
    instance_groups: list[ResolvedInstanceGroup] = Field(default_factory=list)   # empty: instance_type × count
    processes_per_host: int
    strategy: Strategy
    custom_mpi_options: str = ""
    mp_parameters: dict[str, Any] | None = None   # SMP parameters as the user gave them (aliases folded)
    hyperparameters: dict[str, Any] = Field(default_factory=dict)   # user's, unencoded
    hyperparameter_encoding: HyperparameterEncoding = HyperparameterEncoding.V2   # SDK v3's for ModelTrainer jobs
    environment: dict[str, str] = Field(default_factory=dict)
    network_interface: str = "eth0"       # "lo" for local instance types
    master_port: int = 7777
    max_run: int | None = None
    output_path: str | None = None
    checkpoint_s3_uri: str | None = None
    checkpoint_local_path: str | None = None
    region: str | None = None
    # TensorFlow's model_dir argument: None = the SDK default (planner), False = no model_dir hyperparameter,
    # str = as given
    model_dir: str | Literal[False] | None = None
