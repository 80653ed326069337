"""The training-image catalog: which framework / Python versions SageMaker has an image for (data in images.json).

Families follow the SageMaker SDK's image configuration: `pytorch`, `tensorflow`, `mxnet`, `huggingface`,
`pytorch-smp` (SMP v2 jobs run in the smdistributed-modelparallel image) and `pytorch-neuron` (Trainium).
Pure: no network, no boto3. backends/sagemaker/images.py turns a choice into an ECR URI.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from . import versions

FAMILIES = ("pytorch", "tensorflow", "mxnet", "huggingface", "pytorch-smp", "pytorch-neuron")


@functools.cache
def _data() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("images.json").read_text(encoding="utf-8")
    return {k: v for k, v in json.loads(text).items() if not k.startswith("_")}


def family(name: str) -> dict[str, Any]:
    return _data()[name]


def version_order(version: str) -> tuple[tuple[int, ...], int]:
    """Sort key: by version, the short alias before its full form ('2.3' before '2.3.0')."""
    return (versions.parse(version) if versions.is_version(version) else (0,)), len(version)


def _sort_key(version: str) -> tuple[int, ...]:
    return version_order(version)[0]


def known_versions(name: str) -> list[str]:
    """Every version string the family accepts (full versions and their short aliases), oldest first."""
    fam = family(name)
    return sorted({*fam["versions"], *fam["aliases"]}, key=version_order)


def full_version(name: str, version: str) -> str | None:
    """The catalog entry a user's version string stands for ('2.3' → '2.3.0'), or None when there is no image."""
    fam = family(name)
    resolved = fam["aliases"].get(version, version)
    return resolved if resolved in fam["versions"] else None


def nearest(options: list[str], version: str, count: int = 3) -> list[str]:
    """The `count` options closest to `version` (by version order), for 'did you mean' messages."""
    if not versions.is_version(version):
        return options[-count:]
    target = versions.parse(version)

    def distance(option: str) -> tuple[int, ...]:
        parsed = _sort_key(option)
        width = max(len(parsed), len(target))
        a, b = parsed + (0,) * (width - len(parsed)), target + (0,) * (width - len(target))
        return tuple(abs(x - y) for x, y in zip(a, b, strict=True))

    return sorted(sorted(options, key=lambda o: (distance(o), version_order(o)))[:count], key=version_order)


@dataclass(frozen=True)
class ImageChoice:
    """One image of the catalog: repository, tag parts and what it accepts."""

    family: str
    repository: str
    tag_version: str            # the version as the user wrote it (the SDK keeps it in the tag: '2.3' → 2.3-gpu-py311)
    py_versions: tuple[str, ...]
    processor: str              # gpu, cpu or trn
    container_version: str | None = None   # CUDA/OS suffix (cu121-ubuntu20.04), Neuron sdk-ubuntu suffix
    transformers_version: str | None = None


class NoImage(LookupError):
    """No catalog image: `key` names the argument to change, `message` says what exists."""

    def __init__(self, key: str, message: str, value: Any = None) -> None:
        super().__init__(message)
        self.key, self.message, self.value = key, message, value


def processor_of(gpus: int, neuron_cores: int, trainium: bool) -> str:
    if trainium:
        return "trn"
    if neuron_cores:
        return "inf"
    return "gpu" if gpus else "cpu"


def _smp_cuda(framework_version: str, instance_type: str) -> str:
    # the SDK's rule (image_uris.get_training_image_uri): CUDA 12.4 for PT 2.5, 12.1 for 2.1-2.4 or P5, else 11.8
    if framework_version.startswith("2.5"):
        return "cu124"
    if ".p5." in instance_type or framework_version.startswith(("2.1", "2.2", "2.3", "2.4")):
        return "cu121"
    return "cu118"


def _versioned(name: str, key: str, version: str) -> dict[str, Any]:
    full = full_version(name, version)
    if full is None:
        options = known_versions(name)
        raise NoImage(key,
                      f"no {name} training image for version {version}; "
                      f"nearest: {', '.join(nearest(options, version))} "
                      f"(all: {', '.join(options)}); or give image_uri", version)
    return family(name)["versions"][full]


def choose(name: str, *, version: str, processor: str, instance_type: str, version_key: str = "framework_version",
           base: str | None = None, base_version: str | None = None) -> ImageChoice:
    """The image of family `name` for these versions on this processor; NoImage says which argument to change.

    huggingface: `version` is transformers_version, `base`/`base_version` the pytorch or tensorflow version."""
    fam = family(name)
    if processor not in fam["processors"]:
        raise NoImage("instance_type",
                      f"{name} training images exist for {'/'.join(fam['processors'])} instances only, "
                      f"not {processor} ({instance_type}); choose another instance type or give image_uri",
                      instance_type)
    row = _versioned(name, version_key, version)
    transformers = None
    if name == "huggingface":
        assert base is not None and base_version is not None
        key = f"{base}{base_version}"
        resolved = row["aliases"].get(key, key)
        bases = row["bases"]
        if resolved not in bases:
            have = sorted(b for b in bases)
            raise NoImage(f"{base}_version", f"transformers {version} images exist for {', '.join(have)} only; "
                                             "change the versions or give image_uri", base_version)
        transformers, row, tag_version = version, bases[resolved], base_version
    else:
        tag_version = version
    suffix = (row.get("container_version") or {}).get(processor)
    if name == "huggingface" and processor == "gpu" and suffix is None:
        suffix = "cu110-ubuntu18.04"  # the SDK's default for HuggingFace GPU images without their own suffix
    if name == "pytorch-smp":
        suffix = _smp_cuda(version, instance_type)
    if name == "pytorch-neuron":
        sdk = max(row["sdk_versions"], key=lambda s: _sort_key(s[3:]))
        suffix = f"{sdk}-{suffix}" if suffix else sdk
    return ImageChoice(family=name, repository=row["repository"], tag_version=tag_version,
                       py_versions=tuple(row["py_versions"]), processor=processor, container_version=suffix,
                       transformers_version=transformers)


def tag(choice: ImageChoice, py_version: str) -> str:
    """`<version>-<processor>-<py>[-<suffix>]`; HuggingFace: `<base>-transformers<v>-...`; Neuron: `-neuron-`
    for trn."""
    prefix = choice.tag_version if choice.transformers_version is None else \
        f"{choice.tag_version}-transformers{choice.transformers_version}"
    processor = "neuron" if choice.family == "pytorch-neuron" else choice.processor
    return "-".join(p for p in (prefix, processor, py_version, choice.container_version) if p)
