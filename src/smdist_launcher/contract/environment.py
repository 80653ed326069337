"""The SM_* environment of sagemaker-training-toolkit, built by value from the contract's files (pure)."""
from __future__ import annotations

import json
from typing import Any

from .config_files import DEFAULT_GROUP
from .hyperparameters import decode_hyperparameters, split_hyperparameters, to_cmd_args
from .layout import MLPaths

# Any of these framework parameters makes the current group a distribution group (toolkit rule).
DISTRIBUTION_FLAGS = (
    "sagemaker_mpi_enabled", "sagemaker_parameter_server_enabled", "sagemaker_distributed_dataparallel_enabled",
    "sagemaker_pytorch_ddp_enabled", "sagemaker_torch_distributed_enabled",
    "sagemaker_pytorch_xla_multi_worker_enabled",
    "sagemaker_multi_worker_mirrored_strategy_enabled",
)


def encode_env_value(value: Any) -> str:
    """The toolkit's encoding: str as is, None as "", anything else compact sorted JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def to_env_vars(mapping: dict[str, Any]) -> dict[str, str]:
    """`SM_` + key.upper(), nothing else changed (hyphens stay)."""
    return {f"SM_{k.upper()}": encode_env_value(v) for k, v in mapping.items()}


def _instance_groups(resource_config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    groups = resource_config.get("instance_groups") or []
    if not groups:
        groups = [{"instance_group_name": resource_config.get("current_group_name", DEFAULT_GROUP),
                   "instance_type": resource_config.get("current_instance_type", "local"),
                   "hosts": list(resource_config.get("hosts") or [])}]
    return {g["instance_group_name"]: g for g in groups}


def module_dir(submit_directory: Any, paths: MLPaths) -> str:
    """SM_MODULE_DIR. The toolkit gives sagemaker_submit_directory as it is: on SageMaker the S3 URI of the code
    archive; under the SDK's local mode "/opt/ml/code", since that mode rewrites a local (file://) source to the code
    dir it mounts the source on (``_update_local_src_path``). A local source here (the plan carries source_dir as
    given: "src", "/home/me/src") was likewise staged into the code dir, so it is reported as that dir, as the
    script's processes see it. (Given a local path by hand, the toolkit would report that path; no SDK sends one.)"""
    text = str(submit_directory or "")
    return text if text.startswith("s3://") else str(paths.code_dir)


def training_environment(paths: MLPaths, resource_config: dict[str, Any], hyperparameters_raw: dict[str, str],
                         input_data_config: dict[str, Any], *, num_gpus: int, num_cpus: int, num_neurons: int = 0,
                         framework_module: str | None = None, job_name: str | None = None,
                         smddprun_installed: bool = False, smddpmprun_installed: bool = False) -> dict[str, Any]:
    """Every property of the toolkit's `Environment` (what SM_TRAINING_ENV holds)."""
    decoded = decode_hyperparameters(hyperparameters_raw)
    user_hps, framework_params, reserved = split_hyperparameters(decoded)
    current_host = resource_config.get("current_host", "algo-1")
    hosts = list(resource_config.get("hosts") or [current_host])
    groups = _instance_groups(resource_config)
    current_group = resource_config.get("current_group_name", DEFAULT_GROUP)
    dist_groups = list(framework_params.get("sagemaker_distribution_instance_groups") or [])
    if not dist_groups and any(framework_params.get(flag) for flag in DISTRIBUTION_FLAGS):
        dist_groups = [current_group]
    distribution_hosts = [h for name in groups if name in dist_groups for h in groups[name].get("hosts", [])]
    master = distribution_hosts[0] if distribution_hosts else hosts[0]
    entry_point = reserved.get("sagemaker_program") or ""
    module_name = entry_point[:-3] if entry_point.endswith(".py") else entry_point
    channel_dirs = {name: str(paths.channel_dir(name)) for name in input_data_config}
    return {
        "additional_framework_parameters": framework_params,
        "channel_input_dirs": channel_dirs,
        "current_host": current_host,
        "current_instance_group": current_group,
        "current_instance_group_hosts": list(groups.get(current_group, {}).get("hosts", [])),
        "current_instance_type": resource_config.get("current_instance_type", "local"),
        "distribution_hosts": distribution_hosts,
        "distribution_instance_groups": dist_groups,
        "framework_module": framework_module,
        "hosts": hosts,
        "hyperparameters": user_hps,
        "input_config_dir": str(paths.input_config_dir),
        "input_data_config": input_data_config,
        "input_dir": str(paths.input_dir),
        "instance_groups": list(groups),
        "instance_groups_dict": groups,
        "is_hetero": len(groups) > 1,
        "is_master": current_host == master,
        "is_modelparallel_enabled": bool(framework_params.get("sagemaker_mpi_enabled")) and "mp_parameters" in user_hps,
        "is_smddpmprun_installed": smddpmprun_installed,
        "is_smddprun_installed": smddprun_installed,
        "job_name": reserved.get("sagemaker_job_name") or job_name,
        "log_level": reserved.get("sagemaker_container_log_level", 20),
        "master_hostname": master,
        "model_dir": str(paths.model_dir),
        "module_dir": module_dir(reserved.get("sagemaker_submit_directory"), paths),
        "module_name": module_name,
        "network_interface_name": resource_config.get("network_interface_name", "eth0"),
        "num_cpus": num_cpus,
        "num_gpus": num_gpus,
        "num_neurons": num_neurons,
        "output_data_dir": str(paths.output_data_dir),
        "output_dir": str(paths.output_dir),
        "output_intermediate_dir": str(paths.output_intermediate_dir),
        "resource_config": resource_config,
        "user_entry_point": entry_point,
    }


def build_training_env(paths: MLPaths, resource_config: dict[str, Any], hyperparameters_raw: dict[str, str],
                       input_data_config: dict[str, Any], **kwargs: Any) -> dict[str, str]:
    """SM_* (as `Environment.to_env_vars`) plus CURRENT_HOST, SAGEMAKER_JOB_NAME, SAGEMAKER_REGION and
    TRAINING_JOB_NAME."""
    env = training_environment(paths, resource_config, hyperparameters_raw, input_data_config, **kwargs)
    user_hps = env["hyperparameters"]
    mapping: dict[str, Any] = {
        "hosts": env["hosts"], "network_interface_name": env["network_interface_name"], "hps": user_hps,
        "user_entry_point": env["user_entry_point"], "framework_params": env["additional_framework_parameters"],
        "resource_config": resource_config, "input_data_config": input_data_config,
        "output_data_dir": env["output_data_dir"], "channels": sorted(env["channel_input_dirs"]),
        "current_host": env["current_host"], "current_instance_type": env["current_instance_type"],
        "current_instance_group": env["current_instance_group"],
        "current_instance_group_hosts": env["current_instance_group_hosts"],
        "instance_groups": env["instance_groups"], "instance_groups_dict": env["instance_groups_dict"],
        "distribution_instance_groups": env["distribution_instance_groups"], "is_hetero": env["is_hetero"],
        "module_name": env["module_name"], "log_level": env["log_level"], "framework_module": env["framework_module"],
        "input_dir": env["input_dir"], "input_config_dir": env["input_config_dir"], "output_dir": env["output_dir"],
        "num_cpus": env["num_cpus"], "num_gpus": env["num_gpus"], "num_neurons": env["num_neurons"],
        "model_dir": env["model_dir"], "module_dir": env["module_dir"], "training_env": env,
        "user_args": to_cmd_args(user_hps), "output_intermediate_dir": env["output_intermediate_dir"],
    }
    if "topology" in resource_config:
        mapping["topology"] = resource_config["topology"]
    for name, path in env["channel_input_dirs"].items():
        mapping[f"channel_{name}"] = path
    for key, value in user_hps.items():
        mapping[f"hp_{key}"] = value
    out = to_env_vars(mapping)
    out["CURRENT_HOST"] = env["current_host"]
    if env["job_name"]:
        out["SAGEMAKER_JOB_NAME"] = env["job_name"]
        out["TRAINING_JOB_NAME"] = env["job_name"]
    region = decode_hyperparameters(hyperparameters_raw).get("sagemaker_region")
    if region:
        out["SAGEMAKER_REGION"] = str(region)
    return out
