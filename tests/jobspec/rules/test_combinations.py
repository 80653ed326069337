from __future__ import annotations

from typing import Any

from ..conftest import messages, problems


def test_launcher_conflicts_reported_through_validation(args: dict[str, Any]) -> None:
    args["distribution"] = {"torch_distributed": {"enabled": True}, "mpi": {"enabled": True}}
    assert problems("pytorch", args) == ["distribution.mpi.enabled"]


def test_pytorch_rejects_parameter_server(args: dict[str, Any]) -> None:
    args["distribution"] = {"parameter_server": {"enabled": True}}
    errs = messages("pytorch", args)
    assert list(errs) == ["distribution.parameter_server"]
    assert "no parameter-server runner" in errs["distribution.parameter_server"]


def test_tensorflow_rejects_torch_launchers(args: dict[str, Any]) -> None:
    args.update(framework_version="2.13", distribution={"torch_distributed": {"enabled": True},
                                                        "pytorchddp": {"enabled": True}})
    assert problems("tensorflow", args) == ["distribution.pytorchddp", "distribution.torch_distributed",
                                            "distribution.torch_distributed"]


def test_mxnet_allows_only_ps_and_mpi(args: dict[str, Any]) -> None:
    args.update(framework_version="1.9", distribution={"parameter_server": {"enabled": True}})
    assert problems("mxnet", args) == []
    args["distribution"] = {"smdistributed": {"dataparallel": {"enabled": True}}}
    assert problems("mxnet", args) == ["distribution.smdistributed"]


def test_huggingface_follows_its_base_framework(args: dict[str, Any]) -> None:
    hf = {k: v for k, v in args.items() if k != "framework_version"}
    hf.update(transformers_version="4.36", pytorch_version="2.1", distribution={"pytorchddp": {"enabled": True}})
    assert problems("huggingface", hf) == []
    hf.update(pytorch_version=None, tensorflow_version="2.13",
              distribution={"multi_worker_mirrored_strategy": {"enabled": True}})
    del hf["pytorch_version"]
    assert problems("huggingface", hf) == []


def test_generic_framework_allows_everything(args: dict[str, Any]) -> None:
    args.update(image_uri="123456789012.dkr.ecr.us-west-2.amazonaws.com/train:1",
                distribution={"smdistributed": {"modelparallel": {"enabled": True,
                                                                  "parameters": {"tensor_parallel_degree": 2,
                                                                                                  "ddp": True}}},
                              "mpi": {"enabled": True}})
    assert problems("framework", args) == []


def test_distribution_instance_groups(args: dict[str, Any]) -> None:
    args["distribution"] = {"instance_groups": ["train"], "torch_distributed": {"enabled": True}}
    assert problems("pytorch", args) == ["distribution.instance_groups"]
    del args["instance_type"], args["instance_count"]
    args["instance_groups"] = [{"instance_group_name": "gpu", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}]
    assert problems("pytorch", args) == ["distribution.instance_groups[0]"]
    args["distribution"]["instance_groups"] = ["gpu"]
    assert problems("pytorch", args) == []
    args["distribution"] = {"instance_groups": ["gpu"]}
    assert problems("pytorch", args) == ["distribution.instance_groups"]


def test_smddp_instance_types_follow_aws_support_table(args: dict[str, Any]) -> None:
    # AWS's SMDDP table (and the SDK's SM_DATAPARALLEL_SUPPORTED_INSTANCE_TYPES): p3.16xlarge, p3dn, p4d, p4de
    for dist in ({"smdistributed": {"dataparallel": {"enabled": True}}}, {"pytorchddp": {"enabled": True}}):
        args.update(framework_version="2.2.0", py_version="py310", distribution=dist)
        for instance_type in ("ml.p3.16xlarge", "ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge"):
            args["instance_type"] = instance_type
            assert problems("pytorch", args) == [], (dist, instance_type)
        args["instance_type"] = "ml.p3.8xlarge"  # a GPU instance outside the table stays refused, naming the four
        errs = messages("pytorch", args)
        (path, msg), = errs.items()
        assert path.startswith("distribution.") and "ml.p3.16xlarge" in msg and "ml.p3.8xlarge" in msg
