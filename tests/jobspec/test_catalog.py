from __future__ import annotations

import pytest

from smdist_launcher.jobspec import catalog


def test_gpu_rows() -> None:
    p4d = catalog.lookup("ml.p4d.24xlarge")
    assert (p4d.gpus, p4d.gpu_model, p4d.gpu_memory_gib, p4d.efa, p4d.efa_rdma) == (8, "A100", 40, True, True)
    p5 = catalog.lookup("ml.p5.48xlarge")
    assert (p5.gpus, p5.efa, p5.efa_rdma) == (8, True, False)  # the toolkit's RDMA list lacks p5
    assert catalog.lookup("ml.g5.12xlarge").gpus == 4


def test_trainium_and_cpu_rows() -> None:
    assert catalog.lookup("ml.trn1.32xlarge").neuron_cores == 32
    assert catalog.lookup("ml.trn2.48xlarge").neuron_cores == 64
    m5 = catalog.lookup("ml.m5.xlarge")
    assert (m5.gpus, m5.vcpus, m5.memory_gib) == (0, 4, 16)
    assert catalog.is_trainium("ml.trn1n.32xlarge") and not catalog.is_trainium("ml.p4d.24xlarge")


@pytest.mark.parametrize("name", ["local", "local_cpu", "local_gpu"])
def test_local_types(name: str) -> None:
    info = catalog.lookup(name)
    assert info.local and info.gpus == 0 and catalog.is_local(name)


def test_required_families_present() -> None:
    names = set(catalog.known_instance_types())
    for family in ["ml.p3.2xlarge", "ml.p3.8xlarge", "ml.p3.16xlarge", "ml.p3dn.24xlarge", "ml.p4de.24xlarge",
                   "ml.p5e.48xlarge", "ml.p5en.48xlarge", "ml.p6-b200.48xlarge", "ml.g4dn.xlarge", "ml.g6.48xlarge",
                   "ml.trn1.2xlarge", "ml.trn1n.32xlarge", "ml.c5.xlarge"]:
        assert family in names
    assert not any(n.startswith("_") for n in names)


def test_unknown_raises_keyerror() -> None:
    with pytest.raises(KeyError):
        catalog.lookup("ml.nope.large")
