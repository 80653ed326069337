"""The host's argv from the plan, made runnable here: python/torchrun resolved to this interpreter, per-rank
output tagging switched on, and in local mode mpirun pointed at our rsh agent instead of ssh."""
from __future__ import annotations

import os
import sys

from ..contract.entry_point import EXEC_ENTRY_POINT, SHELL

PYTHON_NAMES = ("python", "python3")
TORCHRUN_AGENT_MODULE = "smdist_launcher.container.torchrun_agent"  # torchrun whose store outlives every agent
_TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch", TORCHRUN_AGENT_MODULE)
_MPIRUN_NAMES = ("mpirun", "mpiexec", "mpirun.real", "orterun")
_HOST_OPTIONS = ("--host", "-host", "-H")
RSH_AGENT_MODULE = "smdist_launcher.container.rsh_agent"
RANK_ENTRY_MODULE = "smdist_launcher.container.rank_entry"


def is_torchrun(argv: list[str]) -> bool:
    if not argv:
        return False
    if os.path.basename(argv[0]) == "torchrun":
        return True
    return len(argv) > 2 and argv[1] == "-m" and argv[2] in _TORCHRUN_MODULES


def is_mpirun(argv: list[str]) -> bool:
    return bool(argv) and os.path.basename(argv[0]) in _MPIRUN_NAMES


def resolve_python(argv: list[str]) -> list[str]:
    """`python`/`torchrun` mean this runtime's interpreter (no PATH lookups that could pick another one); torchrun
    (`torchrun` or `python -m torch.distributed.run`) runs as container/torchrun_agent.py: the same torchrun, whose
    rendezvous store outlives every agent's exit barrier."""
    if not argv:
        return argv
    if argv[0] in PYTHON_NAMES:
        argv = [sys.executable, *argv[1:]]
        if argv[1:3] == ["-m", "torch.distributed.run"]:
            argv[2] = TORCHRUN_AGENT_MODULE
        return argv
    if argv[0] == "torchrun":
        return [sys.executable, "-m", TORCHRUN_AGENT_MODULE, *argv[1:]]
    return list(argv)


def torchrun_with_tee(argv: list[str]) -> list[str]:
    """Add `--tee 3` (both streams, per-rank line prefixes) unless the plan already chose tee/redirects."""
    start = 3 if argv[0] == sys.executable or os.path.basename(argv[0]).startswith("python") else 1
    if any(a in ("--tee", "-t", "--redirects", "-r") or a.startswith(("--tee=", "--redirects=")) for a in argv):
        return argv
    return [*argv[:start], "--tee", "3", *argv[start:]]


def _has_mca(argv: list[str], name: str) -> bool:
    return any(argv[i] in ("-mca", "--mca") and argv[i + 1] == name for i in range(len(argv) - 1))


# A shell entry point's ranks, like Python ones (compat rank_cwd.py), move to their own host's code dir first: mpirun
# starts every rank in its own cwd, the master's code dir, where `./train.sh` would run the master's copy and write
# the master's files. On SageMaker (and any host whose tree is /opt/ml) both are /opt/ml/code: nothing changes.
RANK_CWD_ENV = "SMDIST_RANK_CWD"  # the rank's host's code dir (process_environment.py)
SHELL_RANK_IN_CODE_DIR = f'cd -- "${{{RANK_CWD_ENV}:-.}}" 2>/dev/null; {EXEC_ENTRY_POINT}'


def mpirun_local(argv: list[str], *, agent: bool | str) -> list[str]:
    """mpirun for this machine: tagged output, our interpreter for the ranks, and a remote-start agent: True = our
    rsh agent (local mode), a string = that command (ssh with the job's options, container/multihost.py)."""
    out = [argv[0]]
    extra: list[str] = []
    if "--tag-output" not in argv and "-tag-output" not in argv:
        extra.append("--tag-output")
    if os.geteuid() == 0 and "--allow-run-as-root" not in argv:
        extra.append("--allow-run-as-root")
    if agent:
        rsh_agent = agent if isinstance(agent, str) else f"{sys.executable} -m {RSH_AGENT_MODULE}"
        for name, value in (("plm_rsh_agent", rsh_agent),
                            ("orte_leave_session_attached", "1"),  # orted stays attached: its host runtime owns it
                            ("plm_rsh_no_tree_spawn", "1"),
                            # Several orteds of one machine starting at once can crash in hwloc's shared-memory
                            # topology (OpenMPI 4.1: segfault in hwloc_shmem_topology_write); it is only a cache.
                            ("rtc_hwloc_vmhole", "none")):
            if not _has_mca(argv, name):
                extra += ["-mca", name, value]
    out += extra
    rest = argv[1:]
    if agent:
        # Each host's orted already has that host's PYTHONPATH (its own code dir first); forwarding the master's
        # would point algo-2's ranks at algo-1's code dir.
        rest = [t for i, t in enumerate(rest) if not (t == "PYTHONPATH" and i > 0 and rest[i - 1] == "-x")
                and not (t == "-x" and i + 1 < len(rest) and rest[i + 1] == "PYTHONPATH")]
    # The first `python` is the ranks' interpreter. A shell program (plan/program.py) has none: what follows /bin/sh
    # is the entry point and its arguments, and a hyperparameter value "python" must reach it unchanged.
    program = False
    for i, token in enumerate(rest):
        if not program and token in PYTHON_NAMES:
            token, program = sys.executable, True
        elif not program and token == SHELL:
            program = True
            if rest[i + 1:i + 3] == ["-c", EXEC_ENTRY_POINT]:
                out += [SHELL, "-c", SHELL_RANK_IN_CODE_DIR, *rest[i + 3:]]
                break
        out.append(token)
    return out


def host_option_indexes(argv: list[str]) -> set[int]:
    """Positions of mpirun's --host values: they keep host NAMES (our agent maps them; errors read `node algo-2`)."""
    return {i + 1 for i, a in enumerate(argv[:-1]) if a in _HOST_OPTIONS}


def through_rank_entry(argv: list[str], entry_point: str | None) -> list[str]:
    """Every Python rank of the plan's program runs through container/rank_entry.py (it ends a rank whose script
    finished without the gloo exit abort). `argv` is runnable already (resolve_python, mpirun_local, torchrun's tee):

    - ``python [-m mpi4py] train.py ...`` (alone, or as mpirun's program)
      -> ``python -m rank_entry [-m mpi4py] train.py``
    - ``python -m torch.distributed.run ... train.py ...`` -> ``... -m rank_entry train.py ...`` (torchrun's --module)

    Programs that are not Python scripts, and argv this does not recognize, are left as they are."""
    if not entry_point or not entry_point.endswith(".py") or RANK_ENTRY_MODULE in argv:
        return argv
    if is_torchrun(argv):
        start = 3 if argv[0] == sys.executable else 1
        if any(a in ("--no-python", "--no_python", "-m", "--module") for a in argv[start:]):
            return argv
        i = _index(argv, entry_point, start)
        return argv if i is None else [*argv[:i], "--module", RANK_ENTRY_MODULE, *argv[i:]]
    i = _index(argv, sys.executable, 0)  # the rank program's interpreter (mpirun's program, or the host's own)
    if i is None or _index(argv, entry_point, i + 1) is None:
        return argv
    return [*argv[:i + 1], "-m", RANK_ENTRY_MODULE, *argv[i + 1:]]


def _index(argv: list[str], token: str, start: int) -> int | None:
    return next((i for i in range(start, len(argv)) if argv[i] == token), None)
