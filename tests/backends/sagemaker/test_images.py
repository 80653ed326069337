"""Default DLC image URIs, named as the SageMaker SDK (v2) names them, from the image catalog."""
from __future__ import annotations

import pytest

from smdist_launcher.backends.sagemaker.images import default_image_uri, image_instance_type
from smdist_launcher.jobspec import validate_args
from smdist_launcher.jobspec.catalog import lookup
from smdist_launcher.jobspec.image_catalog import NoImage

SMP_V2 = {"torch_distributed": {"enabled": True},
          "smdistributed": {"modelparallel": {"enabled": True, "parameters": {"hybrid_shard_degree": 2}}}}


def _args(framework: str, **extra):
    base = dict(entry_point="train.py", role="R", instance_type="ml.p4d.24xlarge", instance_count=1)
    return validate_args(framework, {**base, **extra}, check_source=False)


def test_pytorch_keeps_the_version_as_written() -> None:
    args = _args("pytorch", framework_version="2.3", py_version="py311")
    assert default_image_uri(args, "pytorch", lookup("ml.p4d.24xlarge"), "us-west-2") == \
        "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3-gpu-py311"
    assert default_image_uri(args, "pytorch", lookup("ml.c5.xlarge"), "cn-north-1") == \
        "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/pytorch-training:2.3-cpu-py311"


@pytest.mark.parametrize(("version", "py", "instance", "tag"), [
    ("2.3.1", "py311", "ml.p4d.24xlarge", "2.3.1-gpu-py311-cu121"),
    ("2.0.1", "py310", "ml.p4d.24xlarge", "2.0.1-gpu-py310-cu118"),
    ("2.4.1", "py311", "ml.p5.48xlarge", "2.4.1-gpu-py311-cu121"),
    ("2.5.1", "py311", "ml.p5.48xlarge", "2.5.1-gpu-py311-cu124"),
])
def test_smp_v2_runs_in_the_smdistributed_modelparallel_image(version: str, py: str, instance: str, tag: str) -> None:
    args = _args("pytorch", framework_version=version, py_version=py, instance_type=instance, instance_count=2,
                 distribution=SMP_V2)
    assert default_image_uri(args, "pytorch", lookup(instance), "us-west-2", "smp_v2") == \
        f"658645717510.dkr.ecr.us-west-2.amazonaws.com/smdistributed-modelparallel:{tag}"


def test_smp_v2_version_without_an_image_names_the_nearest() -> None:
    args = _args("pytorch", framework_version="2.3", py_version="py311", distribution=SMP_V2)
    with pytest.raises(NoImage) as info:
        default_image_uri(args, "pytorch", lookup("ml.p4d.24xlarge"), "us-west-2", "smp_v2")
    assert info.value.key == "framework_version" and "2.3.0, 2.3.1" in info.value.message


def test_huggingface_keeps_its_cuda_and_os_suffix() -> None:
    args = _args("huggingface", transformers_version="4.36", pytorch_version="2.1", py_version="py310")
    assert default_image_uri(args, "huggingface", lookup("ml.g5.xlarge"), "eu-west-1") == \
        "763104351884.dkr.ecr.eu-west-1.amazonaws.com/huggingface-pytorch-training:2.1-transformers4.36-gpu-py310-cu121-ubuntu20.04"
    with pytest.raises(NoImage) as info:  # HuggingFace training images are GPU only
        default_image_uri(args, "huggingface", lookup("ml.c5.xlarge"), "eu-west-1")
    assert info.value.key == "instance_type"


def test_trainium_uses_the_neuron_repository_and_tag() -> None:
    args = _args("pytorch", framework_version="1.11.0", py_version="py38", instance_type="ml.trn1.32xlarge")
    assert default_image_uri(args, "pytorch", lookup("ml.trn1.32xlarge"), "us-east-1") == \
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training-neuron:1.11.0-neuron-py38-sdk2.4.0-ubuntu20.04"
    newer = _args("pytorch", framework_version="1.13.1", py_version="py310", instance_type="ml.trn1.32xlarge")
    with pytest.raises(NoImage) as info:
        default_image_uri(newer, "pytorch", lookup("ml.trn1.32xlarge"), "us-east-1")
    assert info.value.key == "framework_version" and "1.11" in info.value.message


def test_py_version_must_match_the_image() -> None:
    args = _args("pytorch", framework_version="2.3", py_version="py310")
    with pytest.raises(NoImage) as info:
        default_image_uri(args, "pytorch", lookup("ml.p4d.24xlarge"), "us-west-2")
    assert info.value.key == "py_version" and "'py311'" in info.value.message


def test_generic_framework_has_no_default_image() -> None:
    generic = _args("framework", image_uri="my/image:1")
    assert default_image_uri(generic, "framework", lookup("ml.g5.xlarge"), "eu-west-1") is None


def _groups(kwargs: dict, *types: str, **extra):
    from smdist_launcher import PyTorch

    cluster = {k: v for k, v in kwargs.items() if k not in ("instance_type", "instance_count", "distribution")}
    groups = [{"instance_group_name": f"g{i}", "instance_type": t, "instance_count": 1} for i, t in enumerate(types)]
    est = PyTorch(**{**cluster, "instance_groups": groups, **extra})
    return est.plan("s3://data/train", job_name="j"), est.spec


def test_instance_groups_image_follows_the_accelerators(kwargs: dict) -> None:
    from smdist_launcher.backends.sagemaker.request import image_uri

    # the SDK's rule: the first ml.g*/ml.p* group, wherever the distribution runs (here: nowhere)
    assert image_instance_type(_groups(kwargs, "ml.c5.18xlarge", "ml.g5.12xlarge", "ml.p4d.24xlarge")[0]) == \
        "ml.g5.12xlarge"
    assert image_instance_type(_groups(kwargs, "ml.c5.18xlarge", "ml.m5.xlarge")[0]) == "ml.c5.18xlarge"
    # Trainium: the Neuron image (the SDK would take the first group's CPU image)
    plan, args = _groups({**kwargs, "framework_version": "1.11.0", "py_version": "py38"}, "ml.c5.18xlarge",
                         "ml.trn1.32xlarge",
                         distribution={"torch_distributed": {"enabled": True}, "instance_groups": ["g1"]})
    assert image_instance_type(plan) == "ml.trn1.32xlarge"
    assert "/pytorch-training-neuron:1.11.0-neuron-py38" in image_uri(plan, args, "us-west-2")
