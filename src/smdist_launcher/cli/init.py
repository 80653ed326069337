"""``smdist init [FOLDER]``: write a starter train.py, job.yaml and a small data set into FOLDER (default: the
current folder), ready for `smdist validate` and `smdist run`. Existing files are never overwritten."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .console import problem
from .job_loading import EXIT_INVALID, EXIT_OK


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("init", help="write a starter train.py + job.yaml to run at once",
                              description=" ".join(__doc__.split()))
    p.add_argument("folder", nargs="?", default=".", help="where to write them (created if missing; default: .)")
    return p


def _program() -> str:
    """How the user called us (`.venv/bin/smdist` or `smdist`), to echo in the next steps."""
    called = sys.argv[0] if sys.argv else ""
    return called if os.path.basename(called) == "smdist" else "smdist"


def run(args: argparse.Namespace) -> int:
    from .starter_files import starter_files

    folder = Path(args.folder)
    files = starter_files()
    existing = [str(folder / name) for name in files if (folder / name).exists()]
    if existing:  # refuse before writing anything: no half-written starter
        problem(f"init: {', '.join(existing)} already exist{'s' if len(existing) == 1 else ''}; nothing written. "
                "Choose another folder: smdist init FOLDER")
        return EXIT_INVALID
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "x", encoding="utf-8") as f:  # "x": never replace a file that appeared meanwhile
            f.write(text)
    smdist = _program()
    job = folder / "job.yaml"
    sys.stdout.write(
        f"wrote {', '.join(str(folder / n) for n in files)}\n"
        f"next:\n  {smdist} validate {job}\n  {smdist} run {job}      # 2 simulated hosts x 1 process, on CPU\n"
        f"then edit train.py (your model and data), job.yaml (hosts, processes, hyperparameters) and data/train/\n")
    return EXIT_OK
