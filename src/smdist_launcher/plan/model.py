"""The launch plan: what runs on each host. The one schema every backend consumes.

Pure data (pydantic). Serialisation is deterministic: fields in declaration order,
dict keys sorted, secrets redacted unless explicitly revealed.
"""
from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..contract.hyperparameters import HyperparameterEncoding

# One definition of "secret", shared with the runtime (which must not import pydantic).
from ..contract.secrets import REDACTED, is_secret_key, redact_plan

# A job's input channel, resolved: defined with the job's schema, held by the plan.
from ..jobspec.channel import Channel

# container_command: every host runs the request's ContainerEntrypoint + ContainerArguments once (no launcher of ours)
Launcher = Literal["python", "torchrun", "mpirun", "parameter_server", "container_command"]
HostRole = Literal["node", "mpi_master", "mpi_worker", "ps"]

__all__ = ["Channel", "HostPlan", "InstanceGroupPlan", "LaunchPlan", "Master", "REDACTED", "is_secret_key"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Master(_Model):
    host: str
    port: int


class HostPlan(_Model):
    name: str
    # node: runs argv itself (python / torchrun / parameter_server / container_command);
    # mpi_master: runs the mpirun argv that starts ranks on every host;
    # mpi_worker: runs nothing itself, hosts ranks started by the master's mpirun.
    role: HostRole
    processes: int
    ranks: list[int]
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)


class InstanceGroupPlan(_Model):
    """A group of a job given by instance_groups (what resourceconfig.json lists under instance_groups)."""

    name: str
    instance_type: str
    hosts: list[str]
    distribution: bool = False   # its hosts run the distribution's ranks; the others run the script once, alone


class LaunchPlan(_Model):
    schema_version: int = 1
    job_name: str
    framework: str
    launcher: Launcher
    strategy: str
    instance_type: str
    instance_count: int
    processes_per_host: int
    world_size: int
    network_interface: str
    master: Master
    entry_point: str
    source_dir: str | None = None
    # Only for jobs given by instance_groups (absent from the rendering otherwise, so older pinned plans still match).
    instance_groups: list[InstanceGroupPlan] | None = None
    hosts: list[HostPlan]
    # How argv, hyperparameters.json and the hosts' SM_HP_* carry the hyperparameters: SDK v2's toolkit encoding (absent
    # from the rendering, so pinned plans stay as they were) or SDK v3's (ModelTrainer jobs).
    hyperparameter_encoding: HyperparameterEncoding = HyperparameterEncoding.V2
    hyperparameters: dict[str, Any] = Field(default_factory=dict)
    # What /opt/ml/input/config/hyperparameters.json holds: every value JSON-encoded (SageMaker's encoding; under v3's,
    # the script's string values raw).
    sagemaker_hyperparameters: dict[str, str] = Field(default_factory=dict)
    channels: dict[str, Channel] = Field(default_factory=dict)
    environment: dict[str, str] = Field(default_factory=dict)
    max_run: int | None = None
    output_path: str | None = None
    checkpoint_s3_uri: str | None = None
    checkpoint_local_path: str | None = None

    # ---- access -------------------------------------------------------
    def host(self, name: str) -> HostPlan:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(f"no host {name!r} in plan (hosts: {', '.join(h.name for h in self.hosts)})")

    @property
    def host_names(self) -> list[str]:
        return [h.name for h in self.hosts]

    @property
    def instance_types(self) -> list[str]:
        """Every instance type of the job (one, unless it has several instance groups)."""
        if not self.instance_groups:
            return [self.instance_type]
        return list(dict.fromkeys(g.instance_type for g in self.instance_groups))

    # ---- rendering ----------------------------------------------------
    def to_dict(self, *, reveal_secrets: bool = False) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        if data.get("instance_groups") is None:
            data.pop("instance_groups", None)
        if data.get("hyperparameter_encoding") == HyperparameterEncoding.V2.value:
            data.pop("hyperparameter_encoding")
        if not reveal_secrets:
            data = _redact(data)
        return _sort_dicts(data)

    def to_json(self, *, reveal_secrets: bool = False, indent: int = 2) -> str:
        return json.dumps(self.to_dict(reveal_secrets=reveal_secrets), indent=indent, ensure_ascii=False) + "\n"

    def to_yaml(self, *, reveal_secrets: bool = False) -> str:
        import yaml  # lazy: keeps `import smdist_launcher` light

        class _Dumper(yaml.SafeDumper):
            pass

        def _list(dumper: yaml.SafeDumper, items: list[Any]) -> Any:
            # rank lists on one line ([0, 1, 2, ...]); argv and the rest one item per line
            flow = bool(items) and all(isinstance(x, int) and not isinstance(x, bool) for x in items)
            return dumper.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=flow)

        _Dumper.add_representer(list, _list)
        return yaml.dump(self.to_dict(reveal_secrets=reveal_secrets), Dumper=_Dumper, sort_keys=False,
                         allow_unicode=True, width=120)

    @classmethod
    def from_json(cls, text: str | bytes) -> LaunchPlan:
        return cls.model_validate_json(text)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LaunchPlan:
        return cls.model_validate(data)


def _redact(data: dict[str, Any]) -> dict[str, Any]:
    # env values, hyperparameters and their argv tokens: the one rule of contract.secrets
    return redact_plan(data)


def _sorted(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _sorted(v) for k, v in sorted(obj.items())}
    if isinstance(obj, list):
        return [_sorted(x) for x in obj]
    return obj


def _sort_dicts(data: dict[str, Any]) -> dict[str, Any]:
    """Plan and host fields keep declaration order (readable diffs); free-form maps are sorted."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        if k in ("hosts", "instance_groups"):
            out[k] = [{hk: _sorted(hv) for hk, hv in h.items()} for h in v]
        else:
            out[k] = _sorted(v)
    return out
