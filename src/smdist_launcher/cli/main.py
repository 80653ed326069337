"""``smdist``: the command line. A registry of subcommands, each a module with ``add_parser(subparsers)`` and
``run(args) -> int``.

Only the module of the command being run is imported (``smdist plan`` never imports the local backend); ``smdist
--help`` imports them all to list them. A registered module that is not installed is left out. Exit codes: 0 ok,
1 the plan differs from the pinned one (or the job failed), 2 invalid input.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import signal
import sys
from collections.abc import Sequence
from types import ModuleType

# name → module; order is the order of `smdist --help`.
COMMANDS: dict[str, str] = {
    "init": "smdist_launcher.cli.init",
    "validate": "smdist_launcher.cli.validate",
    "plan": "smdist_launcher.cli.plan",
    "run": "smdist_launcher.cli.run",
    "jobs": "smdist_launcher.cli.jobs",
    "logs": "smdist_launcher.cli.logs",
    "metrics": "smdist_launcher.cli.metrics",
    "report": "smdist_launcher.cli.report",
    "submit": "smdist_launcher.cli.submit",
    "status": "smdist_launcher.cli.status",
    "stop": "smdist_launcher.cli.stop",
    "serve": "smdist_launcher.cli.serve",
    "rm": "smdist_launcher.cli.rm",
    "prune": "smdist_launcher.cli.prune",
    "image": "smdist_launcher.cli.image",
}
_RUN_KEY = "_smdist_run"


def _module(name: str) -> ModuleType | None:
    module_name = COMMANDS[name]
    if importlib.util.find_spec(module_name) is None:
        return None
    return importlib.import_module(module_name)


def _requested(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line, if it is the first positional token."""
    for token in argv:
        if not token.startswith("-"):
            return token if token in COMMANDS else None
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    from ..package_info import __version__

    parser = argparse.ArgumentParser(prog="smdist",
                                     description="Validate, plan and run SageMaker-style distributed training jobs.")
    parser.add_argument("--version", action="version", version=f"smdist {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    wanted = [only] if only and importlib.util.find_spec(COMMANDS[only]) is not None else list(COMMANDS)
    for name in wanted:
        module = _module(name)
        if module is None:
            continue
        module.add_parser(subparsers)
        if name in subparsers.choices:
            subparsers.choices[name].set_defaults(**{_RUN_KEY: module.run})
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser(_requested(argv)).parse_args(argv)
    except SystemExit as exc:  # argparse: --help/--version exit 0, usage errors exit 2
        return exc.code if isinstance(exc.code, int) else 2
    try:
        code = int(getattr(args, _RUN_KEY)(args))
        sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter exit
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_went_away()


def _reader_went_away() -> int:
    """`smdist jobs | head`: the reader closed the pipe. End quietly, as a Unix tool killed by SIGPIPE would (exit
    141); stdout goes to /dev/null first so that the interpreter's final flush cannot raise again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (captured): nothing left to flush
        pass
    return 128 + signal.SIGPIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
