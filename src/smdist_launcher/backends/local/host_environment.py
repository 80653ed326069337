"""The process environment each simulated host's runtime starts with.

This machine's environment (PATH, the venv, credentials for s3://) minus what would make a
host think it is already inside a launcher, plus the job's environment (secrets travel only
this way, never through files) and the local-mode variables of container/README.md."""
from __future__ import annotations

import ipaddress
import json
import os
import sys

from ...contract import MLPaths
from ...contract.config_files import hyperparameters_for
from ...contract.no_follow import HOST_FILE_LIMIT, host_anchor, read_json_nofollow, write_json_nofollow
from ...contract.secrets import SECRET_HPS_ENV, encode_secret_env, redact_hyperparameters_raw, secret_hyperparameters
from ...plan.model import LaunchPlan
from .loopback import confinement_env

# Set by a launcher we might be running under (torchrun, mpirun, a SageMaker container, another
# smdist job): inherited, they would make the hosts join the wrong job.
_INHERITED_PREFIXES = ("OMPI_", "PMIX_", "PMI_", "TORCHELASTIC_", "SM_", "SMDIST_")
_INHERITED_NAMES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
                    "MASTER_ADDR", "MASTER_PORT", "CURRENT_HOST", "TRAINING_JOB_NAME", "SAGEMAKER_JOB_NAME")
# The user's own knobs survive (the jobs folder, the s3 endpoint, host isolation on/off).
_KEEP = ("SMDIST_JOBS_DIR", "SMDIST_S3_ENDPOINT_URL", "SMDIST_WORKER_WAIT_S", "SMDIST_HOST_ISOLATION")


def base_environment(environ: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in environ.items()
           if k in _KEEP or not (k.startswith(_INHERITED_PREFIXES) or k in _INHERITED_NAMES)}
    # The hosts run this Python environment's tools (smddprun, torchrun, smdist-train) even when
    # it was not activated (`.venv/bin/python train_job.py`): its bin folder goes first on PATH.
    bindir = os.path.dirname(sys.executable)
    path = env.get("PATH", "")
    if bindir not in path.split(os.pathsep):
        env["PATH"] = os.pathsep.join(p for p in (bindir, path) if p)
    return env


def host_environment(
    plan: LaunchPlan, host: str, environ: dict[str, str], *, job_id: str, addresses: dict[str, str] | None,
    host_roots: dict[str, str] | None, gpus: list[str] | None, checkpoint_dir: str,
) -> dict[str, str]:
    """gpus: this host's GPU ids for local_gpu; None for CPU instance types (no GPU visible).

    addresses / host_roots: the one-machine shortcuts (container/README.md: names mapped to addresses without DNS,
    MPI without sshd over a shared file system); None for hosts that have a network and name service of their own
    (netns, docker), which take the real cluster path."""
    env = base_environment(environ)
    env.update(plan.environment)
    env.update(plan.host(host).env)
    env.update({"SMDIST_JOB_ID": job_id, "SMDIST_CHECKPOINT_DIR": checkpoint_dir, "PYTHONUNBUFFERED": "1"})
    if addresses is not None:
        env["SMDIST_HOST_MAP"] = json.dumps(addresses, sort_keys=True)
    if host_roots is not None:
        env["SMDIST_LOCAL_HOSTS"] = json.dumps(host_roots, sort_keys=True)
    # Simulated hosts (loopback addresses): every socket the job listens on stays on this host's loopback address
    # (loopback_bind.c). Hosts with real addresses (Slurm nodes) must be reachable from each other: left alone.
    address = (addresses or {}).get(host)
    if address is not None and is_loopback(address):
        env.update(confinement_env(address, env))
        if len(plan.hosts) == 1:
            # A one-node torchrun (no --master_addr/--master_port in argv, as SageMaker runs it) rendezvouses on
            # localhost:<random>, where nothing answers once its store is bound to this host's address. torchrun
            # takes those flags' defaults from PET_*: the host's own address and the job's port.
            env.update({"PET_MASTER_ADDR": address, "PET_MASTER_PORT": str(plan.master.port)})
    # Secret hyperparameters reach the host's runtime only here (hyperparameters.json on disk holds REDACTED).
    raw = hyperparameters_for(plan.model_dump(mode="json"))
    if secret_hyperparameters(raw):
        env[SECRET_HPS_ENV] = encode_secret_env(raw)
    if gpus is None:
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["SMDIST_NUM_GPUS"] = "0"
    else:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
        env["SMDIST_NUM_GPUS"] = str(len(gpus))
    return env


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:  # a host name: a real machine
        return False


def scrub_host_secrets(paths: MLPaths) -> None:
    """After the job: no secret hyperparameter value stays in the host's files, even if its runtime was killed
    before it could take them out itself. Run with more privilege than the job's (root, serve --run-as) inside the
    job's own tree: read and rewritten without following any link the job planted (contract.no_follow). A link or
    special file where hyperparameters.json belongs means the job replaced the file itself: no secret of ours is
    left there, and nothing is read through it."""
    root, ml = host_anchor(paths.root)
    relative = ml / paths.hyperparameters_file.relative_to(paths.root)
    try:
        raw = read_json_nofollow(root, relative, default={}, limit=HOST_FILE_LIMIT) or {}
    except (OSError, ValueError):
        return
    if isinstance(raw, dict) and secret_hyperparameters(raw):
        write_json_nofollow(root, relative, redact_hyperparameters_raw(raw))
