"""How the container starts the user's entry point (toolkit ``process.ProcessRunner._create_command``), without a shell.

``python`` means the container's interpreter (the toolkit writes ``sys.executable``; a plan must not depend on the
machine).
"""
from __future__ import annotations

PYTHON = "python"
MPI4PY = (PYTHON, "-m", "mpi4py")  # an uncaught exception calls MPI_Abort instead of hanging the other ranks


def is_python_program(entry_point: str) -> bool:
    return entry_point.endswith(".py")


def program_argv(entry_point: str, args: list[str], *, under_mpi: bool = False) -> list[str]:
    """``python train.py <args>`` (``python -m mpi4py train.py`` under mpirun).

    The toolkit runs other entry points as ``/bin/sh -c "./train.sh <quoted args>"``; here a ``.sh`` script is given to
    ``/bin/sh`` directly and any other file is executed directly, so arguments never pass through a shell.
    """
    if is_python_program(entry_point):
        return [*(MPI4PY if under_mpi else (PYTHON,)), entry_point, *args]
    if entry_point.endswith(".sh"):
        return ["/bin/sh", entry_point, *args]
    return [entry_point if "/" in entry_point else f"./{entry_point}", *args]
