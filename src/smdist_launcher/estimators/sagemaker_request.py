"""The CreateTrainingJob request a SageMaker submission would send, for display: no AWS call, no boto3, secrets redacted."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ..jobspec.error_items import item
from ..jobspec.rules.arguments import region_problem

if TYPE_CHECKING:  # pragma: no cover
    from ..plan.model import LaunchPlan
    from ..jobspec.estimator_args import EstimatorArgs


def sagemaker_request(plan: LaunchPlan, args: EstimatorArgs, *, region: str | None = None) -> dict[str, Any]:
    """The request for `plan`; `<region>`, `<account>` (and `<role>` without a role) stand for what only AWS knows.

    region: the target region (default: the estimator's `region`). Raises ValidationError with everything that would
    stop the submission before it reaches AWS (local instance types, non-S3 channels, no derivable image, API limits).
    """
    # lazy: the SageMaker backend is only needed here (its boto3 use is lazy too)
    from ..backends.sagemaker import preflight
    from ..backends.sagemaker.request import render_request

    region = region or args.region
    bad_region = region_problem(region) if region is not None else None
    problems = [item("region", bad_region, region)] if bad_region else []
    # a missing role is shown as a placeholder: the request is still worth reading
    problems += [p for p in preflight.problems(plan, args) if p.path != "role"]
    if problems:
        raise ValidationError(problems)
    return render_request(plan, args, region=region)
