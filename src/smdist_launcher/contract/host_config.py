"""write_host_config: the one call a backend makes to turn a plan into one host's /opt/ml tree."""
from __future__ import annotations

import os
from typing import Any

from .config_files import hyperparameters_for, input_data_config_for, resource_config_for, write_json
from .layout import MLPaths
from .secrets import redact_hyperparameters_raw, redact_plan


def redacted_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """Secrets never reach files, even if the caller passed a revealed plan."""
    return redact_plan(plan)


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
    # Secret values reach the script through the runtime (contract.secrets), never through this file on disk.
    write_json(paths.hyperparameters_file, redact_hyperparameters_raw(hyperparameters_for(plan)))
    write_json(paths.input_data_config_file, input_data_config_for(plan, channels))
    write_json(paths.plan_file, redacted_plan(plan))
    return paths
