"""`nvidia-smi` as a simulated host sees it: `--list-gpus` / `-L` list only the GPUs of CUDA_VISIBLE_DEVICES (the
host's share under local_gpu), numbered from 0 as CUDA numbers them; every other use runs the real nvidia-smi as is.

SDK v3's drivers count GPUs with `nvidia-smi --list-gpus` and start that many ranks per host: with several simulated
hosts on one machine each would otherwise start a rank on every GPU of the machine. The shim (write_shim) is a
two-line script first on a host's PATH; the real program is in $SMDIST_REAL_NVIDIA_SMI. Stdlib only."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

REAL_NVIDIA_SMI_ENV = "SMDIST_REAL_NVIDIA_SMI"
_LIST_FLAGS = ("-L", "--list-gpus")
_GPU_LINE = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: ([^)]+)\))?\s*$")


def visible_ids(environ: dict[str, str]) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as a list (indexes or UUIDs); None when unset (every GPU is visible)."""
    if "CUDA_VISIBLE_DEVICES" not in environ:
        return None
    return [d.strip() for d in environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip() and d.strip() != "-1"]


def filter_listing(listing: str, visible: list[str] | None) -> str:
    """`nvidia-smi -L` output keeping the visible GPUs (with their indented MIG lines), renumbered in
    CUDA_VISIBLE_DEVICES order."""
    if visible is None:
        return listing
    blocks: list[tuple[str, str, list[str]]] = []   # (index, uuid, lines)
    for line in listing.splitlines():
        match = _GPU_LINE.match(line)
        if match:
            blocks.append((match.group(1), match.group(3) or "", [line]))
        elif blocks and line.startswith((" ", "\t")):
            blocks[-1][2].append(line)
    out: list[str] = []
    shown = 0
    for wanted in visible:
        block = next((b for b in blocks if wanted in (b[0], b[1]) or (b[1] and b[1].startswith(wanted))), None)
        if block is None:
            continue
        first, *rest = block[2]
        out += [re.sub(r"^GPU \d+:", f"GPU {shown}:", first), *rest]
        shown += 1
    return "".join(f"{line}\n" for line in out)


def write_module_shim(folder: Path, command: str, module: str) -> Path:
    """`folder/command`: `python -m module` with the interpreter that runs smdist-train."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / command
    # quoted for sh: the interpreter's path is taken literally (a space, `$`, a quote)
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m {module} "$@"\n')
    shim.chmod(0o755)
    return shim


def write_shim(folder: Path) -> Path:
    """`folder/nvidia-smi`, running this module with the interpreter that runs smdist-train."""
    return write_module_shim(folder, "nvidia-smi", __spec__.name if __spec__ else __name__)


def main(argv: list[str]) -> int:
    real = os.environ.get(REAL_NVIDIA_SMI_ENV)
    if not real:
        print(f"nvidia-smi: ${REAL_NVIDIA_SMI_ENV} does not name the real nvidia-smi", file=sys.stderr)
        return 127
    if not any(a in _LIST_FLAGS for a in argv):
        os.execv(real, [real, *argv])
    done = subprocess.run([real, *argv], stdout=subprocess.PIPE, text=True, check=False)
    sys.stdout.write(filter_listing(done.stdout, visible_ids(dict(os.environ))))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
