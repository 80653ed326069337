"""The docker engine calls every part of the docker backend shares: the placement (job.py) and the finisher of a job
whose launcher died (local/recovery.py), which removes what is left of it by label without importing the placement."""
from __future__ import annotations

import subprocess

from .image import EngineUnavailable, docker_cli

LABEL = "smdist.job"
CMD_TIMEOUT_S = 120


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([docker_cli(), *args], capture_output=True, text=True, timeout=CMD_TIMEOUT_S,
                          stdin=subprocess.DEVNULL)
    if check and done.returncode != 0:
        raise OSError(f"docker {' '.join(args[:2])} failed: {done.stderr.strip()[-500:]}")
    return done


def remove_job_containers(job_id: str, network: str | None) -> None:
    """Every container of the job (by label) and its network; OSError naming what to remove by hand."""
    try:
        listed = docker("ps", "-aq", "--filter", f"label={LABEL}={job_id}", check=False).stdout.split()
        if listed:
            docker("rm", "-f", *listed, check=False)
        if network:
            docker("network", "rm", network, check=False)
    except (OSError, subprocess.TimeoutExpired, EngineUnavailable) as e:
        raise OSError(f"{e}; docker rm -f them by label {LABEL}={job_id}") from None
