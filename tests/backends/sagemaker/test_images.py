"""Default DLC image URIs: deterministic, best-effort naming."""
from __future__ import annotations

from smdist_launcher.backends.sagemaker.images import default_image_uri, full_version
from smdist_launcher.spec import validate_args
from smdist_launcher.spec.catalog import lookup


def _args(framework: str, **extra):
    base = dict(entry_point="train.py", role="R", instance_type="ml.p4d.24xlarge", instance_count=1)
    return validate_args(framework, {**base, **extra}, check_source=False)


def test_pytorch_gpu_and_cpu() -> None:
    args = _args("pytorch", framework_version="2.3", py_version="py311")
    assert default_image_uri(args, "pytorch", lookup("ml.p4d.24xlarge"), "us-west-2") == \
        "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
    assert default_image_uri(args, "pytorch", lookup("ml.c5.xlarge"), "cn-north-1") == \
        "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/pytorch-training:2.3.0-cpu-py311"


def test_huggingface_and_generic_framework() -> None:
    args = _args("huggingface", transformers_version="4.36", pytorch_version="2.1", py_version="py310")
    assert default_image_uri(args, "huggingface", lookup("ml.g5.xlarge"), "eu-west-1") == \
        "763104351884.dkr.ecr.eu-west-1.amazonaws.com/huggingface-pytorch-training:2.1.0-transformers4.36.0-gpu-py310"
    generic = _args("framework", image_uri="my/image:1")
    assert default_image_uri(generic, "framework", lookup("ml.g5.xlarge"), "eu-west-1") is None


def test_full_version() -> None:
    assert [full_version(v) for v in ("2", "2.3", "2.3.1")] == ["2.0.0", "2.3.0", "2.3.1"]
