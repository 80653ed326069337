from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from .cluster import SlurmCluster, available


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    why = available()
    if why:
        pytest.skip(f"no Slurm cluster: {why}")
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm")).start()
    saved = {k: os.environ.get(k) for k in ("PATH", "SLURM_CONF")}
    os.environ.update(cluster.env())
    try:
        yield cluster
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        cluster.stop()
