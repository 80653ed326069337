"""Fixtures: the Kubernetes API emulator (emulator.py) as a subprocess on 127.0.0.1, stopped by PID, and a kubeconfig
pointing at it, so the backend finds the cluster the usual way."""
from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

EMULATOR = Path(__file__).with_name("emulator.py")


@dataclass(frozen=True)
class Emulated:
    url: str
    kubeconfig: Path
    logs_dir: Path        # <logs_dir>/<namespace>/<pod>.log is what the emulator serves as a pod's log


def _kubeconfig(path: Path, url: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "emulator",
        "clusters": [{"name": "emulator", "cluster": {"server": url}}],
        "users": [{"name": "tester", "user": {"token": "not-checked"}}],
        "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "tester"}}],
    }))
    return path


@pytest.fixture(scope="session")
def k8s_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulated]:
    root = tmp_path_factory.mktemp("k8s-emulator")
    logs = root / "pod-logs"
    logs.mkdir()
    proc = subprocess.Popen([sys.executable, str(EMULATOR), "--logs-dir", str(logs)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # blocks until it listens, or ends empty when it died
        if not first.startswith("listening on "):
            proc.kill()
            pytest.fail(f"the emulator did not start: {first}{proc.stderr.read() if proc.stderr else ''}")
        url = f"http://127.0.0.1:{int(first.split()[-1])}"
        yield Emulated(url, _kubeconfig(root / "kubeconfig", url), logs)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def cluster(k8s_emulator: Emulated):
    from smdist_launcher.backends.kubernetes.cluster import Cluster

    c = Cluster(kubeconfig=str(k8s_emulator.kubeconfig))
    yield c
    c.close()
