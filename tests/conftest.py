"""Fixtures every test folder may use."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# The moto S3 fixtures (`moto_endpoint`, `s3`) for every test folder: a test names them, nothing to import;
# skip_policy: only GPU tests may skip in CI.
pytest_plugins = ["backends.moto_s3", "skip_policy"]

MNIST_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mnist"


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background by a non-interactive shell (`cmd &`) inherits SIGINT ignored, and an
    ignored signal stays ignored across exec: every `smdist run` a test spawns would then ignore the Ctrl-C the
    test sends (Python installs no KeyboardInterrupt handler over SIG_IGN). A handled signal is reset to the
    default at exec, so handling it here gives the children the default a terminal would."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def tiny_mnist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mnist example's synthetic data set, small (256 train / 64 test images): `<dir>/{train,test}`."""
    out = tmp_path_factory.mktemp("mnist")
    subprocess.run([sys.executable, str(MNIST_EXAMPLE / "make_data.py"), str(out), "--train", "256", "--test", "64"],
                   check=True, capture_output=True, timeout=120)
    return out


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The docker backend's tests go last, and the base image they need (minutes to build with a cold cache) is
    built in the background meanwhile."""
    _prebuild_sdk_v3(config, items)
    docker_dir = Path(__file__).resolve().parent / "backends" / "docker"
    docker = [item for item in items if docker_dir in Path(str(item.path)).parents]
    if not docker:
        return
    items[:] = [item for item in items if item not in docker] + docker
    from backends.docker.engine import prebuild_in_background

    log = Path(tempfile.gettempdir()) / f"smdist-prebuild-{os.getpid()}.log"
    proc = prebuild_in_background(log)
    if proc is not None:
        config.stash[_PREBUILD] = (proc, log)


_PREBUILD = pytest.StashKey["tuple[subprocess.Popen[bytes], Path]"]()
_PREBUILD_SDK_V3 = pytest.StashKey["tuple[subprocess.Popen[bytes], Path]"]()
SDK_V3_TESTS = Path(__file__).resolve().parent / "serve" / "test_sdk_v3_client.py"
SDK_V3_FIXTURE = "sdk_v3_python"


@pytest.fixture(scope="session")
def sdk_v3_python() -> Path:
    """The official SDK v3's venv python ($SMDIST_TEST_SDK_V3_PYTHON: one you already have), built or waited for
    whatever test asks first: no test depends on another having built it (serve/sdk_v3_env.py: cached, locked)."""
    given = os.environ.get("SMDIST_TEST_SDK_V3_PYTHON")
    if given:
        return Path(given)
    from serve.sdk_v3_env import build

    return build()


def _prebuild_sdk_v3(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The SDK v3 venv (minutes to build with a cold cache) starts building at collection, in the background, when
    a test that needs it was collected; the `sdk_v3_python` fixture waits for it (serve/sdk_v3_env.py)."""
    needed = any(Path(str(i.path)) == SDK_V3_TESTS or SDK_V3_FIXTURE in getattr(i, "fixturenames", ())
                 for i in items)
    if os.environ.get("SMDIST_TEST_SDK_V3_PYTHON") or not needed:
        return
    from serve.sdk_v3_env import prebuild_in_background as prebuild_sdk_v3

    log = Path(tempfile.gettempdir()) / f"smdist-prebuild-sdk-v3-{os.getpid()}.log"
    proc = prebuild_sdk_v3(log)
    if proc is not None:
        config.stash[_PREBUILD_SDK_V3] = (proc, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    sdk_v3, sdk_v3_log = config.stash.get(_PREBUILD_SDK_V3, (None, None))
    if sdk_v3 is not None and sdk_v3.poll() is None:   # the session ended first: its half-made venv is rebuilt later
        os.killpg(sdk_v3.pid, 9)
        sdk_v3.wait(timeout=60)
    if sdk_v3_log is not None and sdk_v3 is not None and sdk_v3.returncode == 0:
        sdk_v3_log.unlink(missing_ok=True)
    proc, log = config.stash.get(_PREBUILD, (None, None))
    if proc is None or log is None:
        return
    if proc.poll() is None:   # the session ended before the build did
        from backends.docker.engine import stop_prebuild

        stop_prebuild(proc)
    if proc.returncode != 1:   # the log of a failed build stays for a look
        log.unlink(missing_ok=True)
