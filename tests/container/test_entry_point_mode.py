"""container/entry_point_mode.py: a non-Python entry point is made executable, never through a link."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from smdist_launcher.container.entry_point_mode import make_executable


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_shell_scripts_and_commands_get_the_execute_bits(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    for name in ("run.sh", "sub/train", "train.py"):
        (tmp_path / name).write_text("echo hi\n")
        (tmp_path / name).chmod(0o640)
    assert make_executable(tmp_path, "run.sh") is None
    assert make_executable(tmp_path, "sub/train") is None
    assert make_executable(tmp_path, "train.py") is None
    assert _mode(tmp_path / "run.sh") == _mode(tmp_path / "sub/train") == 0o751  # never group/world-writable
    assert _mode(tmp_path / "train.py") == 0o640  # python runs it: left as it is
    assert make_executable(tmp_path, None) is None


def test_a_link_is_not_followed_and_the_reason_is_given(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("secret\n")
    target.chmod(0o600)
    code = tmp_path / "code"
    code.mkdir()
    (code / "run.sh").symlink_to(target)
    message = make_executable(code, "run.sh")
    assert message is not None and "run.sh" in message and str(code) in message
    assert _mode(target) == 0o600
    assert make_executable(code, "missing.sh") is not None
