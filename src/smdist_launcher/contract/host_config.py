"""write_host_config: the one call a backend makes to turn a plan into one host's /opt/ml tree."""
from __future__ import annotations

import os
from typing import Any

from .config_files import hyperparameters_for, input_data_config_for, resource_config_for, write_json
from .layout import MLPaths
from .secrets import REDACTED, is_secret_key


def _redact_env(env: dict[str, Any]) -> dict[str, Any]:
    return {k: (REDACTED if is_secret_key(k) else v) for k, v in env.items()}


def redacted_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """Secrets never reach files, even if the caller passed a revealed plan."""
    out = dict(plan)
    out["environment"] = _redact_env(plan.get("environment") or {})
    out["hosts"] = [{**h, "env": _redact_env(h.get("env") or {})} for h in plan.get("hosts", [])]
    return out


def write_host_config(root: str | os.PathLike[str], plan: dict[str, Any], host: str,
                      channels: dict[str, str] | None = None) -> MLPaths:
    """Create `root` as host `host`'s /opt/ml: config files, channel dirs, model/output/code/checkpoints/run.

    channels: optional {name: input mode} overriding the plan's modes (e.g. File after staging FastFile)."""
    paths = MLPaths(root)
    for d in paths.all_dirs():
        d.mkdir(parents=True, exist_ok=True)
    for name in plan.get("channels") or {}:
        paths.channel_dir(name).mkdir(parents=True, exist_ok=True)
    write_json(paths.resource_config_file, resource_config_for(plan, host))
    write_json(paths.hyperparameters_file, hyperparameters_for(plan))
    write_json(paths.input_data_config_file, input_data_config_for(plan, channels))
    write_json(paths.plan_file, redacted_plan(plan))
    return paths
