"""``smddprun CMD ...``: the wrapper SageMaker's SMDDP runner puts between mpirun and the
training command. It maps MPI's rank variables onto the ones torch.distributed's ``env://``
reads, then execs the command with its argv untouched.

    mpirun -np 16 --host algo-1:8,algo-2:8 -x SMDATAPARALLEL_SERVER_ADDR=algo-1 smddprun python train.py

Stdlib only: it runs before anything else in the container.
"""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence

# (target, sources in order of preference): Open MPI first, then MPICH/Intel MPI/Slurm PMI.
RANK_SOURCES: dict[str, tuple[str, ...]] = {
    "RANK": ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"),
    "WORLD_SIZE": ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"),
    "LOCAL_RANK": ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"),
    "LOCAL_WORLD_SIZE": ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"),
}
DEFAULT_PORT = "7592"  # SMDATAPARALLEL_SERVER_PORT's value in SageMaker's runner


class SmddprunError(RuntimeError):
    """Raised (and printed as one line) when the environment cannot describe the job."""


def _first(env: Mapping[str, str], names: Sequence[str]) -> str | None:
    for name in names:
        value = env.get(name)
        if value not in (None, ""):
            return value
    return None


def _first_host(env: Mapping[str, str]) -> str | None:
    """First host of the job's host list: SM_HOSTS (JSON list, SageMaker) or SMDDP_HOSTS
    (comma-separated, ``host`` or ``host:slots`` as given to ``mpirun --host``)."""
    raw = env.get("SM_HOSTS")
    if raw:
        try:
            hosts = json.loads(raw)
        except ValueError as exc:
            raise SmddprunError(f"SM_HOSTS={raw!r} is not a JSON list of host names ({exc}); fix or unset it") from exc
        if isinstance(hosts, list) and hosts:
            return str(hosts[0])
    raw = env.get("SMDDP_HOSTS")
    if raw:
        return raw.split(",")[0].split(":")[0].strip() or None
    return None


def torch_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables to set for torch.distributed, computed from MPI's (pure: no side effects)."""
    out: dict[str, str] = {}
    for target, sources in RANK_SOURCES.items():
        value = _first(env, sources) or env.get(target)
        if value is None:
            if target in ("LOCAL_RANK", "LOCAL_WORLD_SIZE"):
                continue
            raise SmddprunError(
                f"smddprun: cannot tell {target}: none of {', '.join(sources)} or {target} is set. "
                "Run smddprun under mpirun (mpirun -np N smddprun python train.py)."
            )
        if not value.isdigit():
            raise SmddprunError(
                f"smddprun: {target} from the MPI environment is {value!r}; expected a non-negative integer")
        out[target] = value
    if "LOCAL_RANK" not in out:
        out["LOCAL_RANK"] = "0"
    if "LOCAL_WORLD_SIZE" not in out:
        out["LOCAL_WORLD_SIZE"] = "1"
    if int(out["RANK"]) >= int(out["WORLD_SIZE"]):
        raise SmddprunError(f"smddprun: RANK {out['RANK']} is not below WORLD_SIZE {out['WORLD_SIZE']}")
    local_size = int(out["LOCAL_WORLD_SIZE"])
    out["GROUP_RANK"] = str(int(out["RANK"]) // max(local_size, 1))  # node index (torchrun's name)

    single_node = local_size == int(out["WORLD_SIZE"]) or env.get("SMDATAPARALLEL_USE_SINGLENODE") == "1"
    addr = env.get("SMDATAPARALLEL_SERVER_ADDR") or env.get("MASTER_ADDR") or _first_host(env)
    if not addr:
        if not single_node:
            raise SmddprunError(
                "smddprun: no rendezvous host for a multi-node job: set SMDATAPARALLEL_SERVER_ADDR "
                "(mpirun -x SMDATAPARALLEL_SERVER_ADDR=<first host>), MASTER_ADDR or SM_HOSTS"
            )
        addr = "127.0.0.1"
    out["MASTER_ADDR"] = addr
    out["MASTER_PORT"] = env.get("MASTER_PORT") or env.get("SMDATAPARALLEL_SERVER_PORT") or DEFAULT_PORT
    return out


USAGE = "usage: smddprun COMMAND [ARG ...]   (run under mpirun; sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...)"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not args else sys.stdout)
        return 2 if not args else 0
    try:
        os.environ.update(torch_env(os.environ))
    except SmddprunError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    try:
        os.execvp(args[0], args)  # replaces this process; argv passed through untouched
    except OSError as exc:
        print(f"smddprun: cannot run {args[0]!r}: {exc.strerror}", file=sys.stderr)
        return 127
    return 0  # pragma: no cover - execvp does not return


if __name__ == "__main__":
    sys.exit(main())
