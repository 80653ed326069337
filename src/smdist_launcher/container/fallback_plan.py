"""A plan for a container that got none (a plain SageMaker job): the toolkit's Process runner on every host,
`python <sagemaker_program> <hyperparameters as args>`, each host on its own."""
from __future__ import annotations

from typing import Any

from ..contract import decode_hyperparameters, split_hyperparameters, to_cmd_args

TOOLKIT_MASTER_PORT = 7777


def plan_from_contract(resource_config: dict[str, Any], hyperparameters_raw: dict[str, str]) -> dict[str, Any]:
    user, _, reserved = split_hyperparameters(decode_hyperparameters(hyperparameters_raw))
    entry = reserved.get("sagemaker_program")
    if not entry:
        raise ValueError("no launch plan and no sagemaker_program in hyperparameters.json: nothing to run "
                         "(pass --plan FILE or set $SMDIST_PLAN)")
    hosts = list(resource_config.get("hosts") or [resource_config.get("current_host", "algo-1")])
    argv = ["python", str(entry), *to_cmd_args(user)] if str(entry).endswith(".py") else [f"./{entry}",
                                                                                         *to_cmd_args(user)]
    return {
        "job_name": reserved.get("sagemaker_job_name") or "", "launcher": "python", "strategy": "none",
        "instance_type": resource_config.get("current_instance_type", "local"),
        "network_interface": resource_config.get("network_interface_name", "eth0"),
        "master": {"host": hosts[0], "port": TOOLKIT_MASTER_PORT}, "entry_point": entry,
        "hosts": [{"name": h, "role": "node", "processes": 1, "ranks": [i], "argv": argv, "env": {}}
                  for i, h in enumerate(hosts)],
        "sagemaker_hyperparameters": dict(hyperparameters_raw), "environment": {},
    }
