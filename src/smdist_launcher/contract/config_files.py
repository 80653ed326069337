"""input/config/*.json: what SageMaker writes into every host, built from a plan (pure) and read back."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .no_follow import dump_json, read_json_nofollow, write_bytes_at

DEFAULT_GROUP = "homogeneousCluster"
# The content type SageMaker gives the channel that carries model_uri (a job's starting model).
MODEL_CONTENT_TYPE = "application/x-sagemaker-model"


def resource_config_for(plan: dict[str, Any], host: str) -> dict[str, Any]:
    """resourceconfig.json of `host`. `hosts` sorted lexicographically like SageMaker; the group lists hosts in
    plan order so the toolkit's master (first distribution host) is the plan's first host."""
    names = [h["name"] for h in plan["hosts"]]
    if host not in names:
        raise KeyError(f"host {host!r} is not in the plan (hosts: {', '.join(names)})")
    groups = [{"hosts": list(g["hosts"]), "instance_group_name": g["name"], "instance_type": g["instance_type"]}
              for g in plan.get("instance_groups") or []]
    if not groups:
        groups = [{"hosts": names, "instance_group_name": DEFAULT_GROUP, "instance_type": plan["instance_type"]}]
    current = next((g for g in groups if host in g["hosts"]), groups[0])
    return {
        "current_group_name": current["instance_group_name"],
        "current_host": host,
        "current_instance_type": current["instance_type"],
        "hosts": sorted(names),
        "instance_groups": groups,
        "network_interface_name": plan.get("network_interface") or "eth0",
    }


def input_data_config_for(plan: dict[str, Any], modes: dict[str, str] | None = None) -> dict[str, Any]:
    """inputdataconfig.json: one entry per channel."""
    out: dict[str, Any] = {}
    for name, channel in sorted((plan.get("channels") or {}).items()):
        entry: dict[str, Any] = {}
        if channel.get("content_type"):
            entry["ContentType"] = channel["content_type"]
        entry["RecordWrapperType"] = "None"
        entry["S3DistributionType"] = channel.get("distribution") or "FullyReplicated"
        entry["TrainingInputMode"] = (modes or {}).get(name) or channel.get("input_mode") or "File"
        out[name] = entry
    return out


def hyperparameters_for(plan: dict[str, Any]) -> dict[str, str]:
    """hyperparameters.json: the plan already holds SageMaker's encoding (every value JSON text)."""
    if plan.get("sagemaker_hyperparameters"):
        return dict(plan["sagemaker_hyperparameters"])
    return {k: json.dumps(v) for k, v in (plan.get("hyperparameters") or {}).items()}


def write_json(path: str | os.PathLike[str], data: Any, *, mode: int = 0o644) -> None:
    """Atomic write (a reader never sees half a file). The temp file has a random name and is created
    O_EXCL|O_NOFOLLOW, and the rename replaces a link at `path` rather than writing through it: a link planted in
    the folder never redirects the write. The folders above `path` are trusted; in a folder a job owns, use
    no_follow.write_json_nofollow from a trusted root."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        write_bytes_at(folder, path.name, dump_json(data), mode)
    finally:
        os.close(folder)


def read_json(path: str | os.PathLike[str], default: Any = None) -> Any:
    """JSON of `path`, `default` when it does not exist. A link (or FIFO, device) at `path` is refused (OSError),
    not followed; the folders above it are trusted (no_follow.read_json_nofollow walks from a trusted root)."""
    path = Path(path)
    return read_json_nofollow(path.parent, path.name, default)


def read_resource_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    return read_json(path, default={}) or {}


def read_hyperparameters_raw(path: str | os.PathLike[str]) -> dict[str, str]:
    return read_json(path, default={}) or {}


def read_input_data_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    return read_json(path, default={}) or {}
