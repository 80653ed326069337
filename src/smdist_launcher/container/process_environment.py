"""The environment of the user's processes on one host: job env + SM_* + plan env + local-mode addressing."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ..compat import SITE_DIR
from ..contract import (
    MLPaths,
    build_training_env,
    read_hyperparameters_raw,
    read_input_data_config,
    read_resource_config,
    v3_hyperparameters as v3,
)
from ..contract.hyperparameters import HyperparameterEncoding
from ..contract.layout import DEFAULT_ROOT
from ..contract.secrets import REDACTED, redact_argv, redact_mapping, secret_hyperparameters
from .addressing import map_env_value
from .log_lines import TORCHRUN_PREFIX_TEMPLATE

# The training toolkit's variable for a /opt/ml somewhere else (sagemaker_training.environment.BASE_PATH_ENV).
BASE_DIR_ENV = "SAGEMAKER_BASE_DIR"
# checkpoint_local_path in the host's tree (the backend sets it: backends/local/README.md).
CHECKPOINT_DIR_ENV = "SMDIST_CHECKPOINT_DIR"


def count_gpus(environ: dict[str, str]) -> int:
    """SMDIST_NUM_GPUS, else CUDA_VISIBLE_DEVICES, else `nvidia-smi -L` (the toolkit's method), else 0."""
    if environ.get("SMDIST_NUM_GPUS", "").strip():
        return int(environ["SMDIST_NUM_GPUS"])
    if "CUDA_VISIBLE_DEVICES" in environ:
        return len([d for d in environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip() and d.strip() != "-1"])
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def plan_env(plan: dict[str, Any], host_plan: dict[str, Any], environ: dict[str, str]) -> dict[str, str]:
    """Plan-level then host-level env. Redacted secrets come from the runtime's own process env, or are left out."""
    out: dict[str, str] = {}
    for key, value in {**(plan.get("environment") or {}), **(host_plan.get("env") or {})}.items():
        if value == REDACTED:
            if key in environ:
                out[key] = environ[key]
        else:
            out[key] = str(value)
    return out


def _is_hyperparameter_variable(name: str) -> bool:
    return name == v3.HPS_ENV or name.startswith(v3.HP_ENV_PREFIX)


def v3_hyperparameter_env(env: dict[str, str], toolkit: dict[str, str], planned: dict[str, str],
                          hyperparameters_raw: dict[str, str]) -> dict[str, str]:
    """SDK v3's jobs: SM_HP_* and SM_HPS are v3's, as the plan gives them (in the user's order), not the toolkit's
    (`SM_HP_LEARNING-RATE`, `SM_HP_A=B`, compact JSON): v3's container sets none of those. A secret hyperparameter's
    value, redacted in the plan (contract/secrets.py), comes from hyperparameters.json, where SageMaker wrote it or
    the runtime merged it, whatever backend passed the plan on."""
    out = {k: v for k, v in env.items() if not (_is_hyperparameter_variable(k) and k in toolkit and k not in planned)}
    secrets = v3.decode(secret_hyperparameters(hyperparameters_raw))
    if not secrets:
        return out
    out.update({k: v for k, v in v3.env_vars(secrets).items() if k != v3.HPS_ENV})
    try:
        hps = json.loads(out.get(v3.HPS_ENV) or "")
    except ValueError:
        return out
    if isinstance(hps, dict):
        out[v3.HPS_ENV] = v3.safe_serialize({k: secrets.get(k, v) for k, v in hps.items()})
    return out


def seen_path(path: str, paths: MLPaths, seen: MLPaths) -> str:
    """`path` (a folder of the host's tree as the runtime reaches it) as the user's processes see it."""
    try:
        relative = Path(path).relative_to(paths.root)
    except ValueError:
        return path
    return str(seen.root / relative)


def process_env(paths: MLPaths, plan: dict[str, Any], host_plan: dict[str, Any], environ: dict[str, str],
                host_map: dict[str, str], seen: MLPaths | None = None) -> dict[str, str]:
    """`paths`: the host's tree as this runtime reaches it; `seen`: the same tree as the user's processes see it
    (/opt/ml where host isolation mounted it there; default `paths`). Every path the script is told (SM_* and
    SM_TRAINING_ENV, SM_MODULE_DIR, PYTHONPATH's code dir, SMDIST_CHECKPOINT_DIR, SAGEMAKER_BASE_DIR) names `seen`,
    as a SageMaker container names /opt/ml; the runtime's own variables (SMDIST_RANK_CWD, SMDIST_STACKS_DIR) keep
    `paths`."""
    seen = seen or paths
    resource_config = read_resource_config(paths.resource_config_file)
    resource_config.setdefault("current_host", host_plan["name"])
    hyperparameters_raw = read_hyperparameters_raw(paths.hyperparameters_file)
    sm = build_training_env(
        seen, resource_config, hyperparameters_raw,
        read_input_data_config(paths.input_data_config_file),
        num_gpus=count_gpus(environ), num_cpus=int(environ.get("SMDIST_NUM_CPUS") or os.cpu_count() or 1),
        framework_module=environ.get("SAGEMAKER_TRAINING_MODULE"), job_name=plan.get("job_name"),
        smddprun_installed=shutil.which("smddprun") is not None,
        smddpmprun_installed=shutil.which("smddpmprun") is not None)
    master = plan.get("master") or {}
    controlled = {"MASTER_ADDR": str(master.get("host", "")), "MASTER_PORT": str(master.get("port", "")),
                  **plan_env(plan, host_plan, environ)}
    env = {**environ, **sm, **{k: map_env_value(k, v, host_map) for k, v in controlled.items()}}
    if plan.get("hyperparameter_encoding") == HyperparameterEncoding.V3.value:
        env = v3_hyperparameter_env(env, sm, controlled, hyperparameters_raw)
    iface = plan.get("network_interface") or resource_config.get("network_interface_name") or "eth0"
    env.setdefault("NCCL_SOCKET_IFNAME", iface)
    if host_map:
        env.setdefault("GLOO_SOCKET_IFNAME", iface)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(seen.code_dir), str(SITE_DIR), environ.get("PYTHONPATH"))
                                        if p)
    if env.get(CHECKPOINT_DIR_ENV):
        env[CHECKPOINT_DIR_ENV] = seen_path(env[CHECKPOINT_DIR_ENV], paths, seen)
    env["PYTHONUNBUFFERED"] = "1"
    env["SMDIST_HOST"] = host_plan["name"]
    argv = [str(a) for a in host_plan.get("argv") or []]
    if "torchrun" in argv[:2] and int(plan.get("processes_per_host") or 1) > 1:
        # what torchrun would set itself, with a banner on every host: one thread per process when they share one
        env.setdefault("OMP_NUM_THREADS", "1")
    if "mpirun" in argv[:2]:
        # the toolkit's `-x LD_LIBRARY_PATH` warns when it is unset (DLCs always set it); glibc ignores an empty one
        env.setdefault("LD_LIBRARY_PATH", "")
    # sagemaker_training.environment reads the job under $SAGEMAKER_BASE_DIR, else /opt/ml: point it at this host's
    # tree unless the processes see that at /opt/ml (local mode: inside the host's private mount namespace).
    if os.path.realpath(seen.root) != os.path.realpath(DEFAULT_ROOT):
        env[BASE_DIR_ENV] = str(seen.root)
    elif seen != paths:
        env.pop(BASE_DIR_ENV, None)  # one inherited from this machine would name another tree than /opt/ml
    # MPI ranks start in mpirun's cwd (the master's code dir); the compat sitecustomize moves them to their host's.
    env["SMDIST_RANK_CWD"] = str(paths.code_dir)
    # Ranks register a stack dump there (compat sitecustomize); the launcher asks for it before stopping a hung job.
    env["SMDIST_STACKS_DIR"] = str(paths.run_dir / "stacks")
    env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] = TORCHRUN_PREFIX_TEMPLATE  # our rank parser relies on it
    return env


def recorded_environment(env: dict[str, str], inherited: dict[str, str], job_keys: list[str]) -> dict[str, str]:
    """What the runtime set or changed plus the job's own variables (``job_keys``), secret values redacted.

    Variables the runtime merely inherited are left out: they are the caller's (AWS credentials, tokens, HOME)
    and the record outlives the job in the job folder."""
    out = {k: v for k, v in env.items() if k in job_keys or inherited.get(k) != v}
    out = redact_mapping(out)  # SECRET_KEY=..., SM_HP_HUB_TOKEN=...
    for key, field in (("SM_HPS", None), ("SM_TRAINING_ENV", "hyperparameters")):
        if key in out:
            try:
                data = json.loads(out[key])
                if field is None:
                    data = redact_mapping(data)
                else:
                    data[field] = redact_mapping(data.get(field) or {})
                out[key] = json.dumps(data, sort_keys=True, separators=(",", ":"))
            except (ValueError, AttributeError, TypeError):
                out[key] = REDACTED
    if "SM_USER_ARGS" in out:
        try:
            args = json.loads(out["SM_USER_ARGS"])
            keys = [a.lstrip("-") for a in args[::2]]
            out["SM_USER_ARGS"] = json.dumps(redact_argv(args, keys))
        except (ValueError, AttributeError, TypeError):
            out["SM_USER_ARGS"] = REDACTED
    return out


def write_environment_file(path: os.PathLike[str] | str, env: dict[str, str]) -> None:
    """Like the toolkit's /etc/environment, for debugging and tools (0600). Pass recorded_environment(...)."""
    from ..contract import write_json

    write_json(path, env, mode=0o600)


def load_plan(path: os.PathLike[str] | str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            plan = json.load(f)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"no launch plan at {path}: pass --plan FILE, set $SMDIST_PLAN, or write "
                                "<root>/input/config/launchplan.json (contract.write_host_config does)") from e
    except ValueError as e:
        raise ValueError(f"launch plan {path} is not valid JSON: {e}") from e
    if not isinstance(plan, dict) or not isinstance(plan.get("hosts"), list):
        raise ValueError(f"launch plan {path}: expected a JSON object with a 'hosts' list (LaunchPlan.to_json())")
    return plan
