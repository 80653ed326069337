"""`nvidia-smi --list-gpus` inside a simulated host lists that host's share only (what SDK v3's drivers count),
through the shim a container-command host gets first on PATH; the real program is a fake one here (CI has no GPU)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from smdist_launcher.container.container_command import command_env
from smdist_launcher.container.gpu_listing import filter_listing

from .odd_interpreter import use_odd_interpreter

LISTING = """GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa0000)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb1111)
  MIG 1g.10gb     Device  0: (UUID: MIG-cccc2222)
GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-dddd3333)
GPU 3: NVIDIA H100 80GB HBM3 (UUID: GPU-eeee4444)
"""


def _fake_nvidia_smi(folder: Path) -> Path:
    """A stand-in for the driver's nvidia-smi: prints the 4-GPU listing for -L/--list-gpus, echoes anything else."""
    folder.mkdir(parents=True)
    fake = folder / "nvidia-smi"
    fake.write_text("#!/bin/sh\ncase \"$1\" in -L|--list-gpus) cat <<'END'\n" + LISTING + "END\n;;\n"
                    "*) echo \"real nvidia-smi $*\";; esac\n")
    fake.chmod(0o755)
    return fake


def _host_env(tmp_path: Path, visible: str | None) -> dict[str, str]:
    real = _fake_nvidia_smi(tmp_path / "driver")
    env = {"PATH": f"{real.parent}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    return command_env(env, tmp_path / "shim")


def _run(env: dict[str, str], *args: str) -> str:
    return subprocess.run(["nvidia-smi", *args], env=env, capture_output=True, text=True, check=True,
                          timeout=60).stdout


def test_a_host_lists_only_its_share_numbered_from_zero(tmp_path: Path) -> None:
    env = _host_env(tmp_path, "2,3")
    assert env["PATH"].split(os.pathsep)[0] == str(tmp_path / "shim")
    assert _run(env, "--list-gpus") == ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-dddd3333)\n"
                                        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-eeee4444)\n")
    assert len(_run(env, "-L").splitlines()) == 2


def test_other_uses_reach_the_real_program(tmp_path: Path) -> None:
    env = _host_env(tmp_path, "0")
    assert _run(env, "--query-gpu=name", "--format=csv") == "real nvidia-smi --query-gpu=name --format=csv\n"


def test_a_cpu_host_lists_none_and_unset_lists_all(tmp_path: Path) -> None:
    assert _run(_host_env(tmp_path / "cpu", ""), "-L") == ""
    assert _run(_host_env(tmp_path / "all", None), "-L") == LISTING


def test_uuids_and_mig_lines() -> None:
    assert filter_listing(LISTING, ["GPU-bbbb1111"]) == ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb1111)\n"
                                                         "  MIG 1g.10gb     Device  0: (UUID: MIG-cccc2222)\n")


def test_no_nvidia_smi_shim_without_a_real_nvidia_smi(tmp_path: Path) -> None:
    """The shim folder holds the torchrun shim on every host; an nvidia-smi shim only where a real one exists."""
    from smdist_launcher.container.gpu_listing import REAL_NVIDIA_SMI_ENV

    env = command_env({"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "0"}, tmp_path / "shim")
    assert not (tmp_path / "shim" / "nvidia-smi").exists() and REAL_NVIDIA_SMI_ENV not in env


def test_the_shim_takes_the_interpreter_path_literally(tmp_path: Path, monkeypatch) -> None:
    """An interpreter in a folder with a space, a `$` and quotes: the shim still runs it (shlex-quoted)."""
    from smdist_launcher.container import gpu_listing

    use_odd_interpreter(tmp_path, monkeypatch)
    shim = gpu_listing.write_shim(tmp_path / "bin")
    real = _fake_nvidia_smi(tmp_path / "driver")
    done = subprocess.run([str(shim), "-L"], env={**os.environ, gpu_listing.REAL_NVIDIA_SMI_ENV: str(real)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == LISTING
