"""How the container starts the user's entry point (toolkit ``process.ProcessRunner._create_command``), without a shell
parsing any user value.

``python`` means the container's interpreter (the toolkit writes ``sys.executable``; a plan must not depend on the
machine).
"""
from __future__ import annotations

from ..contract.entry_point import EXEC_ENTRY_POINT, SHELL, EntryPointType, entry_point_type

PYTHON = "python"
MPI4PY = (PYTHON, "-m", "mpi4py")  # an uncaught exception calls MPI_Abort instead of hanging the other ranks


def is_python_program(entry_point: str) -> bool:
    return entry_point_type(entry_point) is EntryPointType.PYTHON_PROGRAM


def _mpi_command(entry_point: str, args: list[str]) -> list[str]:
    """``/bin/sh -c 'exec "$0" "$@"' ./train.sh <args>``: like the toolkit, the file is executed (its ``#!`` line
    picks the interpreter; a file without one runs under /bin/sh) from the rank's working directory, which is the
    code dir; the runtime makes it executable on every host first, as the toolkit's ``entry_point.install`` does."""
    return [SHELL, "-c", EXEC_ENTRY_POINT, f"./{entry_point}", *args]


def program_argv(entry_point: str, args: list[str], *, under_mpi: bool = False) -> list[str]:
    """``python train.py <args>`` (``python -m mpi4py train.py`` under mpirun).

    Other entry points: under mpirun as the toolkit's MPI runners do (``_mpi_command``). On a host of its own (the
    toolkit's Process runner: ``/bin/sh -c "./train.sh <quoted args>"``) a ``.sh`` script is given to ``/bin/sh``
    directly and any other file is executed directly, so arguments never pass through a shell.
    """
    kind = entry_point_type(entry_point)
    if kind is EntryPointType.PYTHON_PROGRAM:
        return [*(MPI4PY if under_mpi else (PYTHON,)), entry_point, *args]
    if under_mpi:
        return _mpi_command(entry_point, args)
    if kind is EntryPointType.SHELL_SCRIPT:
        # `/bin/sh -x.sh` would read the name as options: such a name goes as `./-x.sh`, the toolkit's spelling
        return [SHELL, f"./{entry_point}" if entry_point.startswith("-") else entry_point, *args]
    return [entry_point if "/" in entry_point else f"./{entry_point}", *args]
