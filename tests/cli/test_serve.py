"""`smdist serve`'s command line (cli/serve.py): limits it cannot work with are refused before anything is written."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("limit", [["--max-connections", "0"], ["--request-timeout", "inf"],
                                   ["--request-timeout", "1e300"]])
def test_unusable_limits_are_refused_before_the_credentials_file_is_written(tmp_path: Path,
                                                                            limit: list[str]) -> None:
    """inf or 1e300 seconds made every connection fail in socket.settimeout (OverflowError) while serve ran on;
    a refused start wrote its key into the user's credentials file all the same."""
    credentials = tmp_path / "credentials"
    env = {**os.environ, "AWS_SHARED_CREDENTIALS_FILE": str(credentials), "SMDIST_JOBS_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "smdist_launcher.cli.main", "serve", "--port", "0", "--backend",
                           "process", *limit], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--request-timeout" in done.stderr, done.stderr
    assert not credentials.exists()
