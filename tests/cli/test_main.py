from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from smdist_launcher.cli import main as cli


def test_usage_errors_exit_2_and_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert cli.main(["frobnicate"]) == 2
    assert cli.main(["--help"]) == 0
    assert "validate" in capsys.readouterr().out


def test_absent_command_modules_are_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cli.COMMANDS, "ghost", "smdist_launcher.cli.no_such_module")
    parser = cli.build_parser()
    names = next(a for a in parser._actions if a.dest == "command").choices
    assert "ghost" not in names and {"validate", "plan"} <= set(names)


def test_console_script_runs_only_the_requested_command(job_file: Path) -> None:
    """`smdist validate` imports neither the other subcommands nor torch/boto3."""
    code = ("import sys; from smdist_launcher.cli.main import main; rc = main(['validate', sys.argv[1]]); "
            "loaded = [m for m in ('smdist_launcher.cli.run', 'smdist_launcher.cli.plan', 'torch', 'boto3', 'rich') "
            "if m in sys.modules]; "
            "print(rc, loaded)")
    out = subprocess.run([sys.executable, "-c", code, str(job_file)], capture_output=True, text=True, timeout=120,
                         check=True)
    assert out.stdout.splitlines()[-1] == "0 []"
    smdist = Path(sys.executable).with_name("smdist")
    proc = subprocess.run([str(smdist), "validate", str(job_file)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
