"""`smdist init`: a starter that validates at once, and never a file overwritten."""
from __future__ import annotations

from pathlib import Path

import pytest

from smdist_launcher.cli.main import main


def test_init_writes_a_valid_starter_and_refuses_to_overwrite(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "proj"
    assert main(["init", str(folder)]) == 0
    assert f"smdist validate {folder}/job.yaml" in capsys.readouterr().out
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        "data/train/data.csv", "job.yaml", "train.py"]
    assert main(["validate", str(folder / "job.yaml")]) == 0
    capsys.readouterr()
    (folder / "train.py").write_text("# mine\n")
    (folder / "job.yaml").unlink()
    assert main(["init", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "proj/train.py, " in err and "already exist; nothing written" in err   # all checked before any write
    assert (folder / "train.py").read_text() == "# mine\n" and not (folder / "job.yaml").exists()
