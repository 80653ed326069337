"""Framework / Python versions and image: what SageMaker requires, compared semantically (no exact-string lists)."""
from __future__ import annotations

import re
from collections.abc import Iterator

from ...errors import ErrorItem
from .. import image_catalog, versions
from ..catalog import is_local, is_trainium
from ..error_items import item
from ..estimator_args import HuggingFaceArgs
from .context import RuleContext

_PY = re.compile(r"py3\d*")  # fullmatched: no trailing newline

# (base framework, strategy) → minimum framework version and why
_MINIMUM: dict[tuple[str, str], tuple[str, str]] = {
    ("pytorch", "torch_distributed"): ("1.13", "torch_distributed (torchrun) on GPU instances"),
    ("pytorch", "pytorchddp"): ("1.12", "pytorchddp"),
    ("pytorch", "smddp"): ("1.6", "smdistributed.dataparallel"),
    ("pytorch", "smp_v2"): ("2.0", "SMP v2 (smdistributed.modelparallel with torch_distributed)"),
    ("tensorflow", "multi_worker_mirrored_strategy"): ("2.9", "multi_worker_mirrored_strategy"),
    ("tensorflow", "smddp"): ("2.3", "smdistributed.dataparallel"),
    ("mxnet", "mpi"): ("1.3", "distribution"),
    ("mxnet", "parameter_server"): ("1.3", "distribution"),
}


# (base framework, strategy) → first version whose image ships without the library, and why
_MAXIMUM: dict[tuple[str, str], tuple[str, str]] = {
    ("tensorflow", "smddp"): ("2.12", "smdistributed.dataparallel (the TensorFlow images ship SMDDP up to 2.11; "
                                      "AWS deprecated SMDDP for TensorFlow)"),
}


def _version_field(ctx: RuleContext) -> tuple[str, str | None]:
    """(key path, value) of the version that decides the framework's capabilities."""
    args = ctx.args
    if isinstance(args, HuggingFaceArgs):
        key = "tensorflow_version" if ctx.base_framework == "tensorflow" else "pytorch_version"
        return key, getattr(args, key)
    return "framework_version", args.framework_version


def _required(ctx: RuleContext) -> Iterator[ErrorItem]:
    args = ctx.args
    if args.image_uri:
        return
    if ctx.framework == "framework":
        yield item("image_uri",
                   "is required for the generic Framework estimator (it has no framework image to derive); "
                   "give the training image URI")
        return
    hint = "or give image_uri"
    if isinstance(args, HuggingFaceArgs):
        if args.transformers_version is None:
            yield item("transformers_version", f"is required, e.g. '4.36' ({hint})")
        if args.pytorch_version is None and args.tensorflow_version is None:
            yield item("pytorch_version", f"is required (or tensorflow_version), e.g. '2.1' ({hint})")
    elif args.framework_version is None:
        yield item("framework_version", f"is required, e.g. '2.3' ({hint})")
    if args.py_version is None:
        yield item("py_version", f"is required, e.g. 'py311' ({hint})")


def _formats(ctx: RuleContext) -> Iterator[ErrorItem]:
    args = ctx.args
    keys = ["framework_version"]
    if isinstance(args, HuggingFaceArgs):
        keys += ["transformers_version", "pytorch_version", "tensorflow_version"]
        if args.framework_version is not None:
            yield item("framework_version", "HuggingFace takes pytorch_version or tensorflow_version (plus "
                                            "transformers_version), not framework_version", args.framework_version)
        if args.pytorch_version is not None and args.tensorflow_version is not None:
            yield item("tensorflow_version", "give pytorch_version or tensorflow_version, not both",
                       args.tensorflow_version)
    for key in keys:
        value = getattr(args, key)
        if value is not None and not versions.is_version(value):
            yield item(key, f"must be a version like '2.3' or '2.3.1', got {value!r}", value)
    if args.py_version is not None and not _PY.fullmatch(args.py_version):
        why = "Python 2 is not supported" if args.py_version.startswith("py2") else "expected 'py3' or 'py3<minor>'"
        yield item("py_version", f"{why}; use e.g. 'py311' (got {args.py_version!r})", args.py_version)


def _minimums(ctx: RuleContext) -> Iterator[ErrorItem]:
    if ctx.args.image_uri or ctx.launch.strategy is None:
        return
    key, version = _version_field(ctx)
    if version is None or not versions.is_version(version):
        return
    strategy = ctx.launch.strategy
    base = ctx.base_framework
    need = _MINIMUM.get((base, strategy))
    if (base, strategy) == ("pytorch", "torch_distributed") and ctx.instance_type and is_trainium(ctx.instance_type):
        need = ("1.11", "torch_distributed on Trainium")
    ceiling = _MAXIMUM.get((base, strategy))
    if ceiling and versions.at_least(version, ceiling[0]):
        yield item(key, f"{ceiling[1]} needs {base.capitalize()} < {ceiling[0]}, got {version}; use an older "
                        f"{key} or another distribution", version)
    if need and not versions.at_least(version, need[0]):
        yield item(key,
                   f"{need[1]} needs {'PyTorch' if base == 'pytorch' else base.capitalize()} ≥ {need[0]}, "
                   f"got {version}; "
                   f"raise {key} or change the distribution", version)
    compiler = ctx.args.compiler_config
    if base == "pytorch" and compiler is not None and compiler.enabled and not versions.at_least(version, "1.12"):
        yield item(key, f"compiler_config needs PyTorch ≥ 1.12, got {version}", version)


# At construction a version must exist in some image of the framework; which image (SMP v2, Trainium, the Python
# version, the processor, the region) is decided when the request is built (backends/sagemaker/preflight.py).
_FAMILIES = {"pytorch": ("pytorch", "pytorch-smp", "pytorch-neuron"), "tensorflow": ("tensorflow",),
             "mxnet": ("mxnet",), "huggingface": ("huggingface",)}


def _catalog(ctx: RuleContext, reported: set[str]) -> Iterator[ErrorItem]:
    """The version must name an existing training image when SageMaker is to run the job."""
    args = ctx.args
    if args.image_uri or ctx.framework not in _FAMILIES or ctx.instance is None or is_local(ctx.instance.instance_type):
        return
    key = "transformers_version" if isinstance(args, HuggingFaceArgs) else "framework_version"
    version = getattr(args, key)
    if version is None or key in reported or not versions.is_version(version):
        return
    families = _FAMILIES[ctx.framework]
    if any(image_catalog.full_version(f, version) is not None for f in families):
        return
    options = sorted({v for f in families for v in image_catalog.known_versions(f)}, key=image_catalog.version_order)
    yield item(key, f"no {ctx.framework} training image exists for {version}; nearest: "
                    f"{', '.join(image_catalog.nearest(options, version))} (all: {', '.join(options)}); "
                    "choose one of them or give image_uri", version)


def check(ctx: RuleContext) -> Iterator[ErrorItem]:
    yield from _required(ctx)
    yield from _formats(ctx)
    reported: set[str] = set()
    for error in _minimums(ctx):
        reported.add(error.path)
        yield error
    yield from _catalog(ctx, reported)
