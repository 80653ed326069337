"""Best-effort AWS Deep Learning Container image URIs for framework estimators.

The naming follows the public DLC scheme `<account>.dkr.ecr.<region>.<domain>/<repository>:<version>-<device>-<py>`
(e.g. 763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.3.0-gpu-py311). It is derived
deterministically and is NOT checked against the registry: an unreleased combination gives a URI that does not
exist, and SageMaker reports it when the job starts. Pass `image_uri` to be exact (custom images, exact CUDA tags).
"""
from __future__ import annotations

from ...spec.estimator_args import EstimatorArgs, HuggingFaceArgs
from ...spec.resolved import InstanceInfo

DLC_ACCOUNT = "763104351884"
# Regions whose DLC registry lives in another account (opt-in and partition regions).
DLC_REGION_ACCOUNTS: dict[str, str] = {
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-south-2": "772153158452",
    "ap-southeast-3": "907027046896",
    "ap-southeast-4": "457447274322",
    "ca-west-1": "204538143572",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
    "eu-central-2": "380420809688",
    "eu-south-1": "692866216735",
    "eu-south-2": "503227376785",
    "il-central-1": "780543022126",
    "me-central-1": "914824155844",
    "me-south-1": "217643126080",
    "us-gov-east-1": "446045086412",
    "us-gov-west-1": "442386744353",
}

_REPOSITORIES = {"pytorch": "pytorch-training", "tensorflow": "tensorflow-training", "mxnet": "mxnet-training"}


def registry_host(region: str) -> str:
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{DLC_REGION_ACCOUNTS.get(region, DLC_ACCOUNT)}.dkr.ecr.{region}.{domain}"


def full_version(version: str) -> str:
    """DLC tags carry three components: '2.3' → '2.3.0'."""
    parts = version.split(".")
    return ".".join(parts + ["0"] * (3 - len(parts))) if len(parts) < 3 else version


def device_of(instance: InstanceInfo) -> str:
    if instance.neuron_cores:
        return "neuronx"
    return "gpu" if instance.gpus else "cpu"


def default_image_uri(args: EstimatorArgs, framework: str, instance: InstanceInfo, region: str) -> str | None:
    """The DLC image for the estimator's framework/version/py_version on this instance, or None if none can be named
    (generic Framework estimator or missing versions; validation reports those)."""
    device = device_of(instance)
    if isinstance(args, HuggingFaceArgs):
        base = "tensorflow" if args.tensorflow_version and not args.pytorch_version else "pytorch"
        base_version = args.pytorch_version or args.tensorflow_version
        if not (base_version and args.transformers_version and args.py_version):
            return None
        repository = f"huggingface-{base}-training" + ("-neuronx" if device == "neuronx" else "")
        tag = f"{full_version(base_version)}-transformers{full_version(args.transformers_version)}-{device}-{args.py_version}"
        return f"{registry_host(region)}/{repository}:{tag}"
    repository = _REPOSITORIES.get(framework)
    if repository is None or not (args.framework_version and args.py_version):
        return None
    if device == "neuronx":
        repository += "-neuronx"
    return f"{registry_host(region)}/{repository}:{full_version(args.framework_version)}-{device}-{args.py_version}"
