"""The README works as written: its Python snippets run, and its "your own script in 2 minutes" commands run verbatim
(smdist init → validate → run → jobs/logs, a real 2-host job) without AWS."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from smdist_launcher.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
_BLOCK = re.compile(r"(?P<mark><!-- readme-test: skip[^>]*-->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.S)


def blocks(lang: str) -> list[str]:
    """The README's fenced blocks of a language, less those marked `<!-- readme-test: skip ... -->`."""
    return [m["body"] for m in _BLOCK.finditer(README) if m["lang"] == lang and not m["mark"]]


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def test_python_snippets_run_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init", "my-project"]) == 0      # the snippets are written for the starter's folder
    monkeypatch.chdir(tmp_path / "my-project")
    snippets = blocks("python")
    assert snippets, "no runnable python block in README.md"
    for code in snippets:
        exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})  # noqa: S102 - our own README
    assert "world_size: 16" in capsys.readouterr().out


def test_the_documented_import_paths_do_what_the_readme_says() -> None:
    code = ("import torch.distributed as dist, smdist_launcher.smddp, smdist_launcher.smp as tsm, "
            "smdist_launcher.smp.v1 as smp; assert 'smddp' in dist.Backend.backend_list; "
            "assert callable(tsm.init) and callable(smp.init)")
    assert "import smdist_launcher.smp.v1 as smp" in README and "import smdist_launcher.smddp" in README
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


@pytest.mark.slow
def test_your_own_script_in_2_minutes_runs_verbatim(tmp_path: Path) -> None:
    (commands,) = [b for b in blocks("bash") if b in section("Your own script in 2 minutes")]
    env = {k: v for k, v in os.environ.items() if k not in ("SMDIST_JOBS_DIR", "VIRTUAL_ENV")}
    env["HOME"] = str(tmp_path)                   # `cd ~ && smdist init my-project` lands here
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", commands], cwd=ROOT, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "job.yaml: ok: pytorch torch_distributed, 2 × local, 1 process(es) per host (world size 2)" in out
    assert "[algo-1 r0] epoch 5/5: loss" in out and "completed in" in out
    assert "Completed" in out                     # smdist jobs
    jobs = list((tmp_path / "my-project" / ".smdist" / "jobs").glob("starter-*/output/model.tar.gz"))
    assert len(jobs) == 1
    console = out.split("\nNAME ")[0]            # what `smdist run` showed, before `smdist jobs`' table
    for noise in ("is not empty", "running: ", "Traceback", "success"):
        assert noise not in console, noise
    assert "running: " in out.split("\nNAME ")[1]  # `smdist logs` shows everything
