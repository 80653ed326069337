"""AWS Deep Learning Container image URIs for framework estimators, named the way the SageMaker SDK (v2) names them.

`<account>.dkr.ecr.<region>.<domain>/<repository>:<tag>`, repository and tag from the image catalog
(jobspec/image_catalog.py): the version as written ('2.3' → 2.3-gpu-py311), HuggingFace's CUDA/OS suffix, Trainium's
pytorch-training-neuron `-neuron-py38-sdk2.4.0-ubuntu20.04` tags, and SMP v2 jobs in the smdistributed-modelparallel
image (its own registry account). A combination the catalog lacks raises NoImage naming the argument to change.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...jobspec import image_catalog
from ...jobspec.catalog import is_trainium
from ...jobspec.estimator_args import EstimatorArgs, HuggingFaceArgs
from ...jobspec.image_catalog import ImageChoice, NoImage
from ...jobspec.resolved import InstanceInfo

if TYPE_CHECKING:
    from ...plan.model import LaunchPlan

DLC_ACCOUNT = "763104351884"
# Regions whose DLC registry lives in another account (opt-in and partition regions).
DLC_REGION_ACCOUNTS: dict[str, str] = {
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-east-2": "975050140332",
    "ap-northeast-3": "364406365360",
    "ap-south-2": "772153158452",
    "ap-southeast-3": "907027046896",
    "ap-southeast-4": "457447274322",
    "ap-southeast-5": "550225433462",
    "ap-southeast-6": "633930458069",
    "ap-southeast-7": "590183813437",
    "ca-west-1": "204538143572",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
    "eu-central-2": "380420809688",
    "eu-south-1": "692866216735",
    "eu-south-2": "503227376785",
    "il-central-1": "780543022126",
    "me-central-1": "914824155844",
    "me-south-1": "217643126080",
    "mx-central-1": "637423239942",
    "us-gov-east-1": "446045086412",
    "us-gov-west-1": "442386744353",
}


def registry_host(region: str, family: str = "pytorch") -> str:
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    if family == "pytorch-smp":
        smp = image_catalog.family("pytorch-smp")
        if region not in smp["regions"] and not region.startswith("<"):
            raise NoImage("region", f"the SMP v2 image (smdistributed-modelparallel) is published in "
                                    f"{', '.join(smp['regions'])} only; choose one of them or give image_uri", region)
        return f"{smp['registry_account']}.dkr.ecr.{region}.{domain}"
    return f"{DLC_REGION_ACCOUNTS.get(region, DLC_ACCOUNT)}.dkr.ecr.{region}.{domain}"


def _gpu_family(instance_type: str) -> bool:
    parts = instance_type.split(".")  # the SDK's test: the family (ml.<family>.<size>) starts with g or p
    return len(parts) >= 2 and parts[0] == "ml" and parts[1][:1] in ("g", "p")


def image_instance_type(plan: LaunchPlan) -> str:
    """The instance type the training image is chosen for. One image runs on every instance group: like the SDK
    (EstimatorBase._get_instance_type) the first ml.g*/ml.p* group's, else the first Trainium group's (our addition:
    only the Neuron image drives its cores, where the SDK takes the first group's CPU image), else the first group's.
    Not the distribution group's: a job without distribution, or with it on CPU hosts, still has GPU hosts to serve."""
    if not plan.instance_groups:
        return plan.instance_type
    types = [g.instance_type for g in plan.instance_groups]
    for wanted in (_gpu_family, is_trainium):
        found = next((t for t in types if wanted(t)), None)
        if found is not None:
            return found
    return types[0]


def family_of(args: EstimatorArgs, framework: str, strategy: str | None, instance: InstanceInfo) -> str | None:
    """The catalog family of this job's image, or None for the generic Framework estimator."""
    if isinstance(args, HuggingFaceArgs):
        return "huggingface"
    if framework == "pytorch":
        if strategy == "smp_v2":
            return "pytorch-smp"  # only that image has torch.sagemaker
        return "pytorch-neuron" if is_trainium(instance.instance_type) else "pytorch"
    return framework if framework in ("tensorflow", "mxnet") else None


def image_choice(args: EstimatorArgs, framework: str, strategy: str | None,
                 instance: InstanceInfo) -> ImageChoice | None:
    """The catalog image (None for the generic Framework estimator or missing versions); NoImage if there is none."""
    family = family_of(args, framework, strategy, instance)
    if family is None:
        return None
    processor = image_catalog.processor_of(instance.gpus, instance.neuron_cores, is_trainium(instance.instance_type))
    if isinstance(args, HuggingFaceArgs):
        base = "tensorflow" if args.tensorflow_version and not args.pytorch_version else "pytorch"
        base_version = args.pytorch_version or args.tensorflow_version
        if not (base_version and args.transformers_version and args.py_version):
            return None
        choice = image_catalog.choose(family, version=args.transformers_version, processor=processor,
                                      instance_type=instance.instance_type, version_key="transformers_version",
                                      base=base, base_version=base_version)
    else:
        if not (args.framework_version and args.py_version):
            return None
        choice = image_catalog.choose(family, version=args.framework_version, processor=processor,
                                      instance_type=instance.instance_type)
    if args.py_version not in choice.py_versions:
        raise NoImage("py_version", f"the {choice.repository} image for {choice.tag_version} is built for "
                                    f"{', '.join(choice.py_versions)}; set py_version to "
                                    f"{' or '.join(repr(p) for p in choice.py_versions)} or give image_uri",
                      args.py_version)
    return choice


def default_image_uri(args: EstimatorArgs, framework: str, instance: InstanceInfo, region: str,
                      strategy: str | None = None) -> str | None:
    """The DLC image for the job, or None if none can be named (generic Framework estimator or missing versions).

    Raises NoImage when the catalog has no image for the versions, Python version, processor or region."""
    choice = image_choice(args, framework, strategy, instance)
    if choice is None:
        return None
    assert args.py_version is not None
    return f"{registry_host(region, choice.family)}/{choice.repository}:{image_catalog.tag(choice, args.py_version)}"
