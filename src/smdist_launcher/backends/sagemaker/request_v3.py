"""The CreateTrainingJob request in SageMaker SDK v3's wire shape (sagemaker-v3.md §1.2). Pure: no AWS call.

What `ModelTrainer.train()` of the official SDK v3 sends for the same job, for `trainer.request(wire="v3")` and
`smdist plan JOB --request --wire v3`: the image's entry point replaced by v3's driver line
(`/bin/bash -c "chmod +x .../sm_train.sh && .../sm_train.sh"`), two channels of its own appended (`code`, the source
folder, and `sm_drivers`, v3's driver scripts, both under `s3://<default bucket>/<base job name>/<job>/input/`),
hyperparameters as v3 serializes them (strings raw, other values JSON) with no `sagemaker_*` key (SMP adds
`mp_parameters`), output under `s3://<default bucket>/<base job name>` (GZIP), no Environment unless given.

Built from our request (request.py) for the fields both shapes share, so the two never drift on those.
Our own image (smdist-train) reads the default shape; this one is for comparing with v3 or sending to images that
run v3's drivers. Distributions v3 cannot express (SMDDP's smddprun, SMP v1, parameter server, ...) are refused.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ...contract.v3_hyperparameters import safe_serialize
from ...errors import ErrorItem, ValidationError
from ...jobspec.error_items import item
from ...jobspec.rules.arguments import region_problem
from ...jobspec.v3_configs import in_smp_order
from .locations import default_bucket
from .request import build_request, redact, role_at_submit, target_for

if TYPE_CHECKING:  # pragma: no cover
    from ...jobspec.estimator_args import EstimatorArgs
    from ...plan.model import LaunchPlan
    from ..api import Submission

DRIVERS_DIR = "/opt/ml/input/data/sm_drivers"
CONTAINER_ENTRYPOINT = ["/bin/bash"]
CONTAINER_ARGUMENTS = ["-c", f"chmod +x {DRIVERS_DIR}/sm_train.sh && {DRIVERS_DIR}/sm_train.sh"]
CODE_CHANNEL = "code"
DRIVERS_CHANNEL = "sm_drivers"
MP_PARAMETERS = "mp_parameters"

# our strategies v3 has a config for (Torchrun, Torchrun(smp=SMP), MPI, none); the others, and why not
_NOT_IN_V3 = {
    "smddp": "SMDDP's smddprun launcher (v3 runs SMDDP only as Torchrun with backend='smddp' in the script)",
    "pytorchddp": "SMDDP's smddprun launcher (v3 runs SMDDP only as Torchrun with backend='smddp' in the script)",
    "smp_v1": "SMP v1 (MPI has no smp field; v3 runs SMP v2 as Torchrun(smp=SMP(...)))",
    "parameter_server": "a parameter server (ModelTrainer has no TensorFlow/MXNet configs)",
    "multi_worker_mirrored_strategy": "TensorFlow's MultiWorkerMirroredStrategy",
}


def serialize_hyperparameter(value: Any) -> str:
    """v3's rule: strings as they are (v2 sent `"\\"sgd\\""`), anything else as JSON."""
    return safe_serialize(value)


def v3_hyperparameters(plan: LaunchPlan, args: EstimatorArgs) -> dict[str, str]:
    out = {k: serialize_hyperparameter(v) for k, v in (args.hyperparameters or {}).items()}
    if plan.strategy == "smp_v2" and args.distribution is not None:
        given = args.distribution.normalized().get("smdistributed", {}).get("modelparallel", {})
        out[MP_PARAMETERS] = json.dumps(in_smp_order(given.get("parameters") or {}))
    return out


def v3_problems(plan: LaunchPlan) -> list[ErrorItem]:
    """What v3's wire shape cannot carry, with the key that asks for it."""
    problems = []
    why = _NOT_IN_V3.get(plan.strategy)
    if why is not None:
        problems.append(item("distribution", f"SageMaker SDK v3 cannot express {why}; request it in the default "
                                             "shape (without wire='v3')", plan.strategy))
    groups = plan.instance_groups or []
    if plan.strategy != "single" and len(groups) > 1:
        problems.append(item("distribution.instance_groups",
                             "v3 runs the distribution on every host of every group, this plan on one group only; "
                             "its v3 request would launch something else", [g.name for g in groups]))
    return problems


def base_job_name(plan: LaunchPlan, args: EstimatorArgs) -> str:
    return args.base_job_name or plan.job_name


def build_v3_request(plan: LaunchPlan, args: EstimatorArgs, *, region: str, account: str, partition: str = "aws",
                     role: str | None = None) -> dict[str, Any]:
    """v3's CreateTrainingJob request for this plan (secrets included: never log it)."""
    bucket = default_bucket(region, account)
    base = base_job_name(plan, args)
    output = args.output_path or f"s3://{bucket}/{base}"
    target = target_for(plan, args.model_copy(update={"output_path": output}), region=region, account=account,
                        partition=partition, role=role)
    ours = build_request(plan, args.model_copy(update={"enable_network_isolation": False}), target)
    algorithm = {k: v for k, v in ours["AlgorithmSpecification"].items() if k != "EnableSageMakerMetricsTimeSeries"}
    if args.enable_sagemaker_metrics:
        algorithm["EnableSageMakerMetricsTimeSeries"] = True
    algorithm.update(ContainerEntrypoint=list(CONTAINER_ENTRYPOINT), ContainerArguments=list(CONTAINER_ARGUMENTS))
    prefix = f"s3://{bucket}/{base}/{plan.job_name}/input"
    # v3 states every channel's input mode
    channels = [{**c, "InputMode": c.get("InputMode", plan.channels[c["ChannelName"]].input_mode
                                      if c["ChannelName"] in plan.channels else "File")}
                for c in ours.get("InputDataConfig", []) if c["ChannelName"] not in (CODE_CHANNEL, DRIVERS_CHANNEL)]
    for name in (CODE_CHANNEL, DRIVERS_CHANNEL):
        channels.append({"ChannelName": name, "DataSource": {"S3DataSource": {
            "S3DataType": "S3Prefix", "S3Uri": f"{prefix}/{name}", "S3DataDistributionType": "FullyReplicated"}},
            "InputMode": "File"})
    output_config = {**ours["OutputDataConfig"], "S3OutputPath": output}
    if not args.output_path and not args.output_kms_key:  # v3's default OutputDataConfig, the only one it compresses
        output_config.setdefault("CompressionType", "GZIP")
    replaced = {"AlgorithmSpecification": algorithm, "HyperParameters": v3_hyperparameters(plan, args),
                "OutputDataConfig": output_config}
    request: dict[str, Any] = {}
    for key, value in ours.items():  # the API reference's order, as ours
        if key in ("InputDataConfig", "Environment"):
            continue
        request[key] = replaced.get(key, value)
        if key == "HyperParameters":
            request["InputDataConfig"] = channels
    if args.environment:
        request["Environment"] = dict(args.environment)
    if args.enable_network_isolation:
        request["EnableNetworkIsolation"] = True
    return request


def render_v3_request(submission: Submission, region: str | None = None) -> dict[str, Any]:
    """For display: secrets redacted, `<region>`/`<account>` (and `<role>`) for what only AWS knows.

    ValidationError with everything that stops it: what would stop a submission (preflight) and what v3 cannot
    express."""
    from . import preflight

    plan, args = submission.plan, submission.args()
    region = region or args.region
    bad_region = region_problem(region) if region is not None else None
    problems = [item("region", bad_region, region)] if bad_region else []
    problems += [p for p in preflight.problems(plan, args) if p.path != "role"]
    problems += v3_problems(plan)
    if problems:
        raise ValidationError(problems)
    if args.role is None:
        args = args.model_copy(update={"role": "<role>"})
    assert args.role is not None
    return redact(build_v3_request(plan, args, region=region or "<region>", account="<account>",
                                   role=role_at_submit(args.role)))
