"""Fixtures every test folder may use."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

MNIST_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mnist"


@pytest.fixture(scope="session")
def tiny_mnist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mnist example's synthetic data set, small (256 train / 64 test images): `<dir>/{train,test}`."""
    out = tmp_path_factory.mktemp("mnist")
    subprocess.run([sys.executable, str(MNIST_EXAMPLE / "make_data.py"), str(out), "--train", "256", "--test", "64"],
                   check=True, capture_output=True, timeout=120)
    return out
