from __future__ import annotations

from typing import Any

import pytest

from ..conftest import messages, problems


def test_versions_or_image_required(args: dict[str, Any]) -> None:
    del args["framework_version"], args["py_version"]
    assert problems("pytorch", args) == ["framework_version", "py_version"]
    assert problems("pytorch", {**args, "image_uri": "123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1"}) == []


def test_generic_framework_needs_image(args: dict[str, Any]) -> None:
    assert problems("framework", args) == ["image_uri"]


def test_huggingface_versions(args: dict[str, Any]) -> None:
    assert problems("huggingface", args) == ["framework_version", "pytorch_version", "transformers_version"]
    both = {**args, "transformers_version": "4.36", "pytorch_version": "2.1", "tensorflow_version": "2.13"}
    del both["framework_version"]
    assert problems("huggingface", both) == ["tensorflow_version"]


@pytest.mark.parametrize(("key", "value"), [("framework_version", "2.x"), ("py_version", "py27"), ("py_version",
                                                                                                   "python3")])
def test_formats(args: dict[str, Any], key: str, value: str) -> None:
    assert problems("pytorch", {**args, key: value}) == [key]


def test_semantic_not_exact_strings(args: dict[str, Any]) -> None:
    # SageMaker's exact list rejects "2.2" for torch_distributed; ≥ 1.13 is what matters
    args["distribution"] = {"torch_distributed": {"enabled": True}}
    assert problems("pytorch", {**args, "framework_version": "2.2"}) == []
    errs = messages("pytorch", {**args, "framework_version": "1.12.1"})
    assert errs == {"framework_version": "torch_distributed (torchrun) on GPU instances needs PyTorch ≥ 1.13, "
                                         "got 1.12.1; "
                                         "raise framework_version or change the distribution"}


@pytest.mark.parametrize(("framework", "version", "dist", "ok"), [
    ("pytorch", "1.11", {"pytorchddp": {"enabled": True}}, False),
    ("pytorch", "1.12", {"pytorchddp": {"enabled": True}}, True),
    ("pytorch", "1.13.1", {"torch_distributed": {"enabled": True},
                           "smdistributed": {"modelparallel": {"enabled": True,
                                                               "parameters": {"hybrid_shard_degree": 2}}}}, False),
    ("tensorflow", "2.8", {"multi_worker_mirrored_strategy": {"enabled": True}}, False),
    ("tensorflow", "2.9", {"multi_worker_mirrored_strategy": {"enabled": True}}, True),
    ("mxnet", "1.2", {"mpi": {"enabled": True}}, False),
])
def test_minimum_versions(args: dict[str, Any], framework: str, version: str, dist: dict[str, Any], ok: bool) -> None:
    args.update(framework_version=version, distribution=dist)
    assert problems(framework, args) == ([] if ok else ["framework_version"])


def test_trainium_minimum_is_lower(args: dict[str, Any]) -> None:
    args.update(instance_type="ml.trn1.32xlarge", framework_version="1.11",
                distribution={"torch_distributed": {"enabled": True}})
    assert problems("pytorch", args) == []


def test_image_uri_skips_version_minimums(args: dict[str, Any]) -> None:
    args.update(framework_version="1.9", image_uri="123456789012.dkr.ecr.us-west-2.amazonaws.com/t:1",
                distribution={"torch_distributed": {"enabled": True}})
    assert problems("pytorch", args) == []
