"""`smdist validate` on hostile or broken YAML: exit 2 with one line per problem and its key path, no traceback."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def alias_bomb(levels: int, width: int = 10) -> str:
    """width**levels values from a few hundred bytes: each level lists `width` aliases of the previous one."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "hyperparameters:\n" + "".join(f"  {line}\n" for line in lines)


CLI = "import sys; from smdist_launcher.cli.main import main; sys.exit(main(sys.argv[1:]))"
BASE = ("framework: pytorch\nentry_point: train.py\ninstance_type: local\nframework_version: '2.3'\n"
        "py_version: py311\n")


def _job(tmp_path: Path, extra: str) -> Path:
    (tmp_path / "train.py").write_text("print('hi')\n")
    job = tmp_path / "job.yaml"
    job.write_text(BASE + extra)
    return job


def test_validate_refuses_an_alias_bomb_at_once(tmp_path: Path) -> None:
    job = _job(tmp_path, "instance_count: 1\n" + alias_bomb(9))  # 10**9 values from < 1 KB
    # a subprocess: a bomb that got through would exhaust that process, not the test runner
    done = subprocess.run([sys.executable, "-c", CLI, "validate", str(job)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2, done.stderr
    assert f"{job}: <root>: the document expands to more than 100,000 values" in done.stderr


@pytest.mark.parametrize("extra, expected", [
    ("instance_count: " + "9" * 5000 + "\n", "instance_count: an integer of 5000 digits"),
    ("instance_count: 1\nhyperparameters:\n  x: " + "[" * 5000 + "]" * 5000 + "\n", "hyperparameters.x[0][0]"),
    ("instance_count: !!int abc\n", "instance_count: 'abc' is not an integer"),
    ("instance_count: 1\nmax_run: !!float xyz\n", "max_run: 'xyz' is not a number"),
])
def test_validate_reports_broken_yaml_as_invalid_input(tmp_path: Path, extra: str, expected: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from smdist_launcher.cli.main import main

    job = _job(tmp_path, extra)
    assert main(["validate", str(job)]) == 2
    err = capsys.readouterr().err
    assert f"{job}: {expected}" in err and "Traceback" not in err
