"""The estimator's side of the backend interface: a Submission built once from the plan and the validated arguments,
so that no backend reads the estimator."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..contract.config_files import MODEL_CONTENT_TYPE
from ..jobspec.estimator_args import EstimatorArgs
from ..jobspec.inputs import normalize_inputs

if TYPE_CHECKING:  # pragma: no cover
    from ..backends.api import Submission
    from ..plan.model import Channel, LaunchPlan


def model_channel(args: EstimatorArgs, plan: LaunchPlan) -> tuple[str, Channel] | None:
    """model_uri as SageMaker gives it to the job: one more File channel (`model`, or model_channel_name)."""
    if not args.model_uri:
        return None
    name = args.model_channel_name or "model"
    channel = normalize_inputs({name: args.model_uri}, instance_type=plan.instance_type, base_dir=args.base_dir)[name]
    return name, channel.model_copy(update={"content_type": MODEL_CONTENT_TYPE, "input_mode": "File"})


def build_submission(args: EstimatorArgs, plan: LaunchPlan) -> Submission:
    from ..backends.api import Code, Submission  # lazy: the SDK imports backends only to run

    source: str | None
    if plan.source_dir is not None and plan.source_dir.startswith("s3://"):
        source = None  # an archive on S3: used as it is (SageMaker) or unpacked by the runtime (local)
    else:
        source = args.source_dir_path if plan.source_dir is not None else args.entry_point_path
    entry = args.entry_point_path
    code = Code(source=Path(source) if source else None, entry_point=Path(entry) if entry else None,
                dependencies=tuple(Path(args.base_dir, d) for d in args.dependencies or []),
                follow_symlinks=bool(args.follow_symlinks), base_dir=args.base_dir)
    return Submission(plan=plan, code=code, model_channel=model_channel(args, plan), settings=args)
