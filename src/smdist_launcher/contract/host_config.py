"""write_host_config: the one call a backend makes to turn a plan into one host's /opt/ml tree."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .config_files import hyperparameters_for, input_data_config_for, resource_config_for
from .layout import MLPaths
from .no_follow import host_anchor, open_dir_nofollow, write_json_nofollow
from .secrets import redact_hyperparameters_raw, redact_plan


def redacted_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """Secrets never reach files, even if the caller passed a revealed plan."""
    return redact_plan(plan)


def write_host_config(root: str | os.PathLike[str], plan: dict[str, Any], host: str,
                      channels: dict[str, str] | None = None) -> MLPaths:
    """Create `root` as host `host`'s /opt/ml: config files, channel dirs, model/output/code/checkpoints/run.

    channels: optional {name: input mode} overriding the plan's modes (e.g. File after staging FastFile)."""
    paths = MLPaths(root)
    # On a retry the host's folder is the job's (serve --run-as handed it over): made and written without following a
    # link the job planted there (contract/no_follow.py), from the folder above opt/ml, which the job cannot replace.
    anchor, ml = host_anchor(paths.root)
    anchor.mkdir(parents=True, exist_ok=True)

    def below(path: Path) -> Path:
        return ml / path.relative_to(paths.root)

    for d in paths.all_dirs():
        os.close(open_dir_nofollow(anchor, below(d), create=True))
    data = open_dir_nofollow(anchor, below(paths.input_data_dir))
    try:
        for name in plan.get("channels") or {}:
            if "/" in name or name in ("", ".", ".."):
                raise ValueError(f"channels: {name!r} is not a channel name (one folder name of letters, digits, "
                                 "'.', '-', '_')")
            try:  # a channel staged on an earlier attempt (a link to its data) stays until staging replaces it
                os.mkdir(name, 0o755, dir_fd=data)
            except FileExistsError:
                pass
    finally:
        os.close(data)
    config = {
        paths.resource_config_file: resource_config_for(plan, host),
        # Secret values reach the script through the runtime (contract.secrets), never through this file on disk.
        paths.hyperparameters_file: redact_hyperparameters_raw(hyperparameters_for(plan)),
        paths.input_data_config_file: input_data_config_for(plan, channels),
        paths.plan_file: redacted_plan(plan),
    }
    for file, content in config.items():
        write_json_nofollow(anchor, below(file), content)
    return paths
