"""A host of a container-command job (plan launcher `container_command`): the request's ContainerEntrypoint +
ContainerArguments run once, as the argv they are, the way SageMaker starts a container whose entry point was
overridden (SDK v3's `/bin/bash -c .../sm_train.sh`).

What such a command expects of its container, and what this module gives it on a simulated host:
- absolute /opt/ml paths that are this host's own: required (private mount namespace, container/host_isolation.py,
  or a netns/docker host whose tree is mounted on /opt/ml); without one the host refuses to start the command
  rather than let every simulated host write the machine's /opt/ml;
- `python3`/`pip3` on PATH meaning the interpreter that runs smdist-train (it has torch and our compat modules);
- `nvidia-smi --list-gpus` listing this host's share of the GPUs only (container/gpu_listing.py, a shim first on
  PATH), since v3's drivers size torchrun from it;
- the SM_* / TRAINING_JOB_NAME environment SageMaker and the toolkit set (container/process_environment.py).

Stdlib only, like the rest of the runtime."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

from ..contract.layout import DEFAULT_ROOT
from .gpu_listing import REAL_NVIDIA_SMI_ENV, write_shim
from .torchrun_agent import write_shim as write_torchrun_shim

LAUNCHER = "container_command"
# Only our MPI plans need it: mpirun ranks of a user's command must stay in the cwd the command chose.
_MPI_RANK_CWD_ENV = "SMDIST_RANK_CWD"


class NoPrivateOptMl(RuntimeError):
    """The command would write /opt/ml of the machine, shared by every simulated host."""


def is_container_command(plan: dict[str, Any]) -> bool:
    return plan.get("launcher") == LAUNCHER


def has_own_opt_ml(root: str | os.PathLike[str]) -> bool:
    """The host's tree is /opt/ml itself (a netns or docker host, SageMaker)."""
    return os.path.realpath(root) == os.path.realpath(DEFAULT_ROOT)


def require_private_opt_ml(root: str | os.PathLike[str], isolated: bool, reason: str) -> None:
    if not (isolated or has_own_opt_ml(root)):
        raise NoPrivateOptMl(
            f"this host has no private /opt/ml ({reason}); a container command uses absolute /opt/ml paths, so every "
            "simulated host would share this machine's /opt/ml. Run serve as root (mount namespaces), or use the "
            "netns or docker backend")


INIT_MODULE = "smdist_launcher.container.container_init"


def command_argv(host_plan: dict[str, Any]) -> list[str]:
    """The command exactly as the request gave it (no interpreter substitution, no host-name mapping), under
    container_init: the host ends when the command does, as a container would."""
    argv = [str(a) for a in host_plan.get("argv") or []]
    if not argv:
        raise ValueError(f"plan host {host_plan.get('name')}: a container command needs a non-empty argv")
    return [sys.executable, "-m", INIT_MODULE, "--", *argv]


def own_failure_lines(output_dir: Path, limit: int = 40) -> list[str]:
    """What the command wrote to /opt/ml/output/failure (SageMaker's FailureReason), last `limit` lines; [] if none."""
    try:
        text = (output_dir / "failure").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-limit:]


def _path_with(first: list[str], path: str) -> str:
    parts = [p for p in path.split(os.pathsep) if p]
    return os.pathsep.join([*first, *(p for p in parts if p not in first)])


def command_env(env: dict[str, str], shim_dir: Path) -> dict[str, str]:
    """`env` (process_environment's) made what a container command expects; see the module's docstring."""
    out = dict(env)
    out.pop(_MPI_RANK_CWD_ENV, None)
    first: list[str] = []
    # python3/pip3/torchrun of the interpreter running us, unless PATH finds them there already
    interpreter_dir = os.path.dirname(sys.executable)
    if shutil.which("python3", path=out.get("PATH", "")) != os.path.join(interpreter_dir, "python3"):
        first.append(interpreter_dir)
    real = shutil.which("nvidia-smi", path=out.get("PATH", ""))
    if real is not None:
        write_shim(shim_dir)
        out[REAL_NVIDIA_SMI_ENV] = real
    # torchrun whose rendezvous store outlives every agent's exit barrier (container/torchrun_agent.py), first
    write_torchrun_shim(shim_dir)
    first.insert(0, str(shim_dir))
    out["PATH"] = _path_with(first, out.get("PATH", os.defpath))
    return out
