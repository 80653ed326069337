"""What kind of program an entry point is (sagemaker-training-toolkit ``_entry_point_type``), decided by name only.

The toolkit also calls a ``.py`` entry point a Python package when ``setup.py`` sits beside it; that needs the code
dir, and the launcher runs such a script as a program, so it is not told apart here.

Runtime-safe: stdlib only."""
from __future__ import annotations

from enum import Enum

SHELL = "/bin/sh"  # the toolkit runs every COMMAND entry point through it
# The toolkit's MPI ranks run `/bin/sh -c "./train.sh <shlex-quoted args>"`. Here the command string is this constant
# and the entry point and its arguments follow it as "$0" and "$@": a shell never parses a user value, and each
# argument stays one token (secret restoring and host-name mapping work on tokens, as for Python programs).
EXEC_ENTRY_POINT = 'exec "$0" "$@"'


class EntryPointType(Enum):
    PYTHON_PROGRAM = "python_program"  # *.py: ``python train.py``
    SHELL_SCRIPT = "shell_script"      # *.sh: the toolkit's COMMAND, run by a shell
    COMMAND = "command"                # any other file: executed as it is (the toolkit's COMMAND)

    @property
    def is_python(self) -> bool:
        return self is EntryPointType.PYTHON_PROGRAM


def entry_point_type(entry_point: str) -> EntryPointType:
    if entry_point.endswith(".sh"):
        return EntryPointType.SHELL_SCRIPT
    if entry_point.endswith(".py"):
        return EntryPointType.PYTHON_PROGRAM
    return EntryPointType.COMMAND
