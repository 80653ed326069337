"""resolve(): a validated spec → ResolvedJob (every default filled, aliases folded, the launcher decided).

Pure: no clock, no environment, no file reads. The job name is the given one, else base_job_name, else
"<framework>-training" (no timestamp here, so plans are deterministic; Estimator.fit() adds one).
"""
from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Any

from ..contract.hyperparameters import HyperparameterEncoding
from ..errors import ValidationError
from .catalog import lookup
from .error_items import item
from .job_file import JobFile
from .rules.context import RuleContext, distribution_group

if TYPE_CHECKING:  # pragma: no cover
    from .estimator_args import EstimatorArgs
    from .resolved import ResolvedInstanceGroup, ResolvedJob

MASTER_PORT = 7777


def default_job_name(args: EstimatorArgs, framework: str) -> str:
    return args.base_job_name or f"{framework}-training"


def fold_smp_parameters(params: dict[str, Any]) -> dict[str, Any]:
    """SMP parameters as given, with the alias `partitions` folded into `pipeline_parallel_degree`."""
    out = dict(params)
    if "partitions" in out:
        partitions = out.pop("partitions")
        out.setdefault("pipeline_parallel_degree", partitions)
    return out


def _entry_point(args: EstimatorArgs) -> str:
    entry = args.entry_point or ""
    if args.source_dir:
        return posixpath.normpath(entry.replace("\\", "/"))
    # SageMaker uploads the script alone: sagemaker_program = basename
    return posixpath.basename(entry.replace("\\", "/"))


def _instance_groups(args: EstimatorArgs, strategy: str) -> list[ResolvedInstanceGroup]:
    if not args.instance_groups or args.instance_type is not None:
        return []
    from .resolved import ResolvedInstanceGroup

    ranked = distribution_group(args) if strategy != "single" else None
    return [ResolvedInstanceGroup(name=g.instance_group_name, instance_type=g.instance_type,
                                  instance_count=g.instance_count, distribution=g is ranked)
            for g in args.instance_groups]


def resolve(spec: EstimatorArgs | JobFile, framework: str | None = None, *, job_name: str | None = None) -> ResolvedJob:
    """The ResolvedJob of a validated spec (from validate_args or load_job_file).

    framework defaults to the job file's / the argument model's framework. Raises ValidationError only for a
    bad job_name or a spec that did not come through validation.
    """
    # the schemas (pydantic) and the rules are imported here, not at the top: the estimators import this module
    from .estimator_args import HuggingFaceArgs, TensorFlowArgs
    from .resolved import ResolvedJob
    from .rules.arguments import job_name_problem

    if isinstance(spec, JobFile):
        framework = framework or spec.framework
        job_name = job_name or spec.job_name
        args = spec.args
    else:
        args = spec
        framework = framework or args.framework_name
    ctx = RuleContext(args, framework, check_source=False)
    launch = ctx.launch
    problems = list(launch.errors)
    if ctx.instance_type is None or ctx.instance_count is None or launch.strategy is None:
        problems.append(item("instance_type", "the spec is incomplete; validate it with validate_args() first"))
    name = job_name or default_job_name(args, framework)
    bad_name = job_name_problem(name)
    if bad_name:
        problems.append(item("job_name", bad_name, name))
    if problems:
        raise ValidationError(problems)
    assert ctx.instance_type is not None and ctx.instance_count is not None and launch.strategy is not None
    instance = lookup(ctx.instance_type)
    dist = args.distribution
    mp_parameters = None
    if launch.strategy in ("smp_v1", "smp_v2") and dist is not None:
        mp_parameters = fold_smp_parameters(dist.smp_parameters.model_dump(exclude_unset=True))
        if args.hyperparameter_encoding is HyperparameterEncoding.V3:
            from .v3_configs import in_smp_order

            mp_parameters = in_smp_order(mp_parameters)  # v3's mp_parameters text
    framework_version = args.framework_version
    if isinstance(args, HuggingFaceArgs):
        framework_version = args.pytorch_version or args.tensorflow_version
    return ResolvedJob(
        framework=framework,  # type: ignore[arg-type]
        framework_version=framework_version,
        py_version=args.py_version,
        image_uri=args.image_uri,
        job_name=name,
        entry_point=_entry_point(args),
        source_dir=args.source_dir,
        instance_type=ctx.instance_type,
        instance_count=ctx.instance_count,
        instance=instance,
        instance_groups=_instance_groups(args, launch.strategy),
        processes_per_host=launch.processes_per_host,
        strategy=launch.strategy,
        custom_mpi_options=launch.custom_mpi_options,
        mp_parameters=mp_parameters,
        hyperparameters=dict(args.hyperparameters or {}),
        hyperparameter_encoding=args.hyperparameter_encoding,
        environment=dict(args.environment or {}),
        network_interface="lo" if instance.local else "eth0",
        master_port=MASTER_PORT,
        max_run=args.max_run,
        output_path=args.output_path,
        checkpoint_s3_uri=args.checkpoint_s3_uri,
        checkpoint_local_path=args.checkpoint_local_path,
        region=args.region,
        model_dir=args.model_dir if isinstance(args, TensorFlowArgs) else None,
    )
