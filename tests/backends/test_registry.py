"""`--backend` / fit(backend=): names map to backend modules; unknown or unavailable ones are clear errors."""
from __future__ import annotations

import pytest

from smdist_launcher.backends import registry


def test_every_backend_implements_the_interface_and_the_default():
    from smdist_launcher.backends.api import Backend

    assert registry.DEFAULT == "process"
    assert registry.names() == ["process", "netns", "docker", "slurm", "sagemaker", "kubernetes"]
    for name in registry.names():
        backend = registry.get(name)
        assert isinstance(backend, Backend) and backend.name == name
    assert registry.get("local").name == "process"  # older job records say "local"
    assert registry.for_job(None, ["local"]).name == "process"
    assert registry.for_job(None, ["ml.p4d.24xlarge"]).name == "sagemaker"
    assert registry.for_job("slurm", ["ml.p4d.24xlarge"]).name == "slurm"


def test_unknown_backend_lists_the_choices():
    with pytest.raises(ValueError, match="unknown backend 'podman'; choose one of process, netns, docker, slurm"):
        registry.get("podman")


def test_fit_refuses_a_local_backend_for_sagemaker_instance_types(tmp_path):
    from smdist_launcher import PyTorch

    (tmp_path / "train.py").write_text("print('hi')\n")
    est = PyTorch(entry_point="train.py", source_dir=str(tmp_path), role="arn:aws:iam::111122223333:role/R",
                  instance_type="ml.c5.xlarge", instance_count=1, framework_version="2.3", py_version="py311")
    with pytest.raises(ValueError, match="runs local instance types only"):
        est.fit(backend="netns")


def test_choose_settles_auto_and_refuses_a_backend_that_cannot_run_here():
    up = {"docker": lambda: None, "netns": lambda: None}
    down = {"docker": lambda: "no Docker engine answers (refused)", "netns": lambda: "--backend netns needs root; "
            "run as root, or use --backend process"}
    assert registry.choose("auto", up)[0] == "docker"
    assert registry.choose(None, down) == ("process", "auto: not docker, no Docker engine answers (refused)")
    assert registry.choose("netns", up) == ("netns", "asked for")
    assert registry.choose("process", down) == ("process", "asked for")  # process has no probe: it always runs
    with pytest.raises(ValueError) as docker:
        registry.choose("docker", down)
    assert str(docker.value) == ("backend docker cannot run here: no Docker engine answers (refused); use --backend "
                                 "process (or auto) instead")
    with pytest.raises(ValueError, match=r"^backend netns cannot run here: --backend netns needs root; run as root, "
                                         r"or use --backend process$"):
        registry.choose("netns", down)
    with pytest.raises(ValueError, match="unknown backend 'podman'"):
        registry.choose("podman", up)
