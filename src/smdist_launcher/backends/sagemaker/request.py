"""LaunchPlan + estimator arguments → the exact CreateTrainingJob request. Pure: no AWS call, no file read.

`build_request` gives what is sent (secrets included: the container needs them); `render_request` gives the same
request for display (dry runs, CI pins) with secret-looking Environment/HyperParameters values redacted.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from ...container.host_resilience import RESILIENCE_ENV
from ...contract.config_files import MODEL_CONTENT_TYPE
from ...jobspec.catalog import lookup
from ...jobspec.estimator_args import EstimatorArgs
from ...jobspec.rules.arguments import DEFAULT_MAX_RUN
from ...plan.model import REDACTED, Channel, LaunchPlan, is_secret_key
from ..toolkit.resilience_plan import resilience_of
from .images import default_image_uri, image_instance_type
from .locations import SUBMIT_ARCHIVE, default_bucket, output_path, role_arn, submit_uri

DEFAULT_VOLUME_GB = 30
CONTAINER_CODE_DIR = "/opt/ml/code"
# The plan travels inside the code archive; the runtime (smdist-train) reads $SMDIST_PLAN once the code is unpacked.
PLAN_IN_ARCHIVE = ".smdist/launchplan.json"
PLAN_ENV = "SMDIST_PLAN"
LAUNCHER_ENV = {PLAN_ENV: f"{CONTAINER_CODE_DIR}/{PLAN_IN_ARCHIVE}"}
# With network isolation the container cannot read S3 itself: the archive comes as channel "code".
CODE_CHANNEL = "code"
ISOLATED_SUBMIT_DIRECTORY = f"/opt/ml/input/data/{CODE_CHANNEL}/{SUBMIT_ARCHIVE}"
LOG_LEVEL_KEY = "sagemaker_container_log_level"
_MPI_STRATEGIES = frozenset({"mpi", "smp_v1"})  # the SDK gives MPI jobs model_dir=/opt/ml/model


@dataclass(frozen=True)
class JobTarget:
    """The AWS side of a job, known once the account is (STS) — everything the pure builder cannot guess."""

    region: str
    role_arn: str
    output_path: str   # S3OutputPath
    submit_uri: str    # s3://.../sourcedir.tar.gz (uploaded, or the user's s3:// source_dir)


def target_for(plan: LaunchPlan, args: EstimatorArgs, *, region: str, account: str, partition: str = "aws",
               role: str | None = None) -> JobTarget:
    """Default bucket, output path and code location as the SageMaker SDK chooses them.

    role: the role's ARN when already known (IAM GetRole keeps a role's path); else built from its name."""
    assert args.role is not None  # preflight.check() reports a missing role
    output = output_path(args.output_path, default_bucket(region, account))
    if args.source_dir and args.source_dir.startswith("s3://"):
        code = args.source_dir
    else:
        code = submit_uri(plan.job_name, code_location=args.code_location, output=output)
    return JobTarget(region=region, role_arn=role or role_arn(args.role, account, partition), output_path=output,
                     submit_uri=code)


def resilience_environment(args: EstimatorArgs) -> dict[str, str]:
    """resilience.process_restarts / log_monitoring for smdist-train in our image (it restarts ranks and watches
    their lines itself on SageMaker; preflight refuses them for images that do not run it)."""
    host = resilience_of(args).for_hosts(watch_logs=True)
    return {RESILIENCE_ENV: host.encode()} if host.active else {}


def image_uri(plan: LaunchPlan, args: EstimatorArgs, region: str) -> str:
    uri = args.image_uri or default_image_uri(args, plan.framework, lookup(image_instance_type(plan)), region,
                                              plan.strategy)
    if uri is None:  # preflight.check() reports it with the key path
        raise ValueError("image_uri is required: no training image can be derived")
    return uri


def _model_dir(plan: LaunchPlan, args: EstimatorArgs, target: JobTarget) -> dict[str, str]:
    """TensorFlow without output_path: the SDK's model_dir is under the default bucket (parameter-server and MWMS hosts
    share it), which only the submission knows; the pure plan says /opt/ml/model."""
    if plan.framework != "tensorflow" or args.output_path or "model_dir" in (args.hyperparameters or {}):
        return {}
    if getattr(args, "model_dir", None) is not None or plan.strategy in _MPI_STRATEGIES:
        return {}
    return {"model_dir": json.dumps(f"{target.output_path.rstrip('/')}/{plan.job_name}/model")}


def hyperparameters(plan: LaunchPlan, args: EstimatorArgs, target: JobTarget) -> dict[str, str]:
    submit = ISOLATED_SUBMIT_DIRECTORY if args.enable_network_isolation else target.submit_uri
    out = {**plan.sagemaker_hyperparameters, **_model_dir(plan, args, target),
           "sagemaker_submit_directory": json.dumps(submit),
           "sagemaker_region": json.dumps(target.region)}
    if args.container_log_level is not None:  # the SDK sends the estimator's level (default logging.INFO = 20)
        out[LOG_LEVEL_KEY] = json.dumps(args.container_log_level)
    return out


def _s3_channel(name: str, uri: str, *, distribution: str = "FullyReplicated") -> dict[str, Any]:
    return {"ChannelName": name,
            "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri,
                                            "S3DataDistributionType": distribution}}}


def _channel(name: str, channel: Channel, input_mode: str) -> dict[str, Any]:
    out = _s3_channel(name, channel.uri, distribution=channel.distribution)
    if channel.content_type:
        out["ContentType"] = channel.content_type
    if channel.input_mode != input_mode:
        out["InputMode"] = channel.input_mode
    return out


def input_data_config(plan: LaunchPlan, args: EstimatorArgs, target: JobTarget) -> list[dict[str, Any]]:
    mode = args.input_mode or "File"
    channels = [_channel(name, ch, mode) for name, ch in sorted(plan.channels.items())]
    if args.model_uri:
        model = _s3_channel(args.model_channel_name or "model", args.model_uri)
        channels.append({**model, "ContentType": MODEL_CONTENT_TYPE, "InputMode": "File"})
    if args.enable_network_isolation:
        channels.append(_s3_channel(CODE_CHANNEL, target.submit_uri))
    return channels


def _resource_config(plan: LaunchPlan, args: EstimatorArgs) -> dict[str, Any]:
    out: dict[str, Any] = {"VolumeSizeInGB": args.volume_size or DEFAULT_VOLUME_GB}
    if args.instance_groups:
        out["InstanceGroups"] = [{"InstanceType": g.instance_type, "InstanceCount": g.instance_count,
                                  "InstanceGroupName": g.instance_group_name} for g in args.instance_groups]
    else:
        out.update(InstanceCount=plan.instance_count, InstanceType=plan.instance_type)
    if args.volume_kms_key:
        out["VolumeKmsKeyId"] = args.volume_kms_key
    if args.keep_alive_period_in_seconds is not None:
        out["KeepAlivePeriodInSeconds"] = args.keep_alive_period_in_seconds
    return out


def _algorithm(plan: LaunchPlan, args: EstimatorArgs, region: str) -> dict[str, Any]:
    out: dict[str, Any] = {"TrainingImage": image_uri(plan, args, region),
                           "TrainingInputMode": args.input_mode or "File"}
    if args.metric_definitions:
        out["MetricDefinitions"] = [m.model_dump() for m in args.metric_definitions]
    metrics = args.enable_sagemaker_metrics
    if metrics is None and plan.framework != "framework":
        metrics = True  # the SDK turns it on for every current framework image
    if metrics:
        out["EnableSageMakerMetricsTimeSeries"] = True
    if args.training_repository_access_mode:
        config: dict[str, Any] = {"TrainingRepositoryAccessMode": args.training_repository_access_mode}
        if args.training_repository_credentials_provider_arn:
            config["TrainingRepositoryAuthConfig"] = {
                "TrainingRepositoryCredentialsProviderArn": args.training_repository_credentials_provider_arn}
        out["TrainingImageConfig"] = config
    return out


def _tensorboard(config: dict[str, Any]) -> dict[str, Any]:
    # accepts the SDK's TensorBoardOutputConfig argument names as well as the API's
    names = {"s3_output_path": "S3OutputPath", "container_local_output_path": "LocalPath"}
    return {names.get(k, k): v for k, v in config.items() if v is not None}


def _optional(args: EstimatorArgs) -> dict[str, Any]:
    """Fields sent only when asked for (the SDK's rule: flags only when true)."""
    out: dict[str, Any] = {}
    if args.checkpoint_s3_uri:
        out["CheckpointConfig"] = {"S3Uri": args.checkpoint_s3_uri}
        if args.checkpoint_local_path:
            out["CheckpointConfig"]["LocalPath"] = args.checkpoint_local_path
    if args.subnets is not None and args.security_group_ids is not None:
        out["VpcConfig"] = {"Subnets": list(args.subnets), "SecurityGroupIds": list(args.security_group_ids)}
    if args.enable_network_isolation:
        out["EnableNetworkIsolation"] = True
    if args.encrypt_inter_container_traffic:
        out["EnableInterContainerTrafficEncryption"] = True
    if args.use_spot_instances:
        out["EnableManagedSpotTraining"] = True
    if args.max_retry_attempts is not None:
        out["RetryStrategy"] = {"MaximumRetryAttempts": args.max_retry_attempts}
    if args.disable_profiler:
        out["ProfilerConfig"] = {"DisableProfiler": True}
    if args.tensorboard_output_config:
        out["TensorBoardOutputConfig"] = _tensorboard(args.tensorboard_output_config)
    if args.enable_remote_debug is not None:
        out["RemoteDebugConfig"] = {"EnableRemoteDebug": args.enable_remote_debug}
    if args.enable_infra_check is not None:
        out["InfraCheckConfig"] = {"EnableInfraCheck": args.enable_infra_check}
    if args.enable_session_tag_chaining is not None:
        out["SessionChainingConfig"] = {"EnableSessionTagChaining": args.enable_session_tag_chaining}
    if args.tags:
        out["Tags"] = [t.model_dump() for t in args.tags]
    return out


def build_request(plan: LaunchPlan, args: EstimatorArgs, target: JobTarget) -> dict[str, Any]:
    """The CreateTrainingJob request, keys in the API reference's order. Contains secrets: never log it."""
    output: dict[str, Any] = {"S3OutputPath": target.output_path}
    if args.output_kms_key:
        output["KmsKeyId"] = args.output_kms_key
    if args.disable_output_compression:
        output["CompressionType"] = "NONE"
    stopping: dict[str, Any] = {"MaxRuntimeInSeconds": plan.max_run or args.max_run or DEFAULT_MAX_RUN}
    if args.use_spot_instances and args.max_wait:
        stopping["MaxWaitTimeInSeconds"] = args.max_wait
    request: dict[str, Any] = {
        "TrainingJobName": plan.job_name,
        "AlgorithmSpecification": _algorithm(plan, args, target.region),
        "RoleArn": target.role_arn,
        "HyperParameters": hyperparameters(plan, args, target),
        "InputDataConfig": input_data_config(plan, args, target),
        "OutputDataConfig": output,
        "ResourceConfig": _resource_config(plan, args),
        "StoppingCondition": stopping,
        "Environment": {**plan.environment, **LAUNCHER_ENV, **resilience_environment(args)},
        **_optional(args),
    }
    if not request["InputDataConfig"]:
        del request["InputDataConfig"]  # the API rejects an empty list
    return request


def redact(request: dict[str, Any]) -> dict[str, Any]:
    """A copy for display: values of secret-looking Environment and HyperParameters keys replaced."""
    shown = copy.deepcopy(request)
    for field in ("Environment", "HyperParameters"):
        if field in shown:
            shown[field] = {k: (REDACTED if is_secret_key(k) else v) for k, v in shown[field].items()}
    return shown


def render_request(plan: LaunchPlan, args: EstimatorArgs, *, region: str | None = None, account: str | None = None,
                   partition: str = "aws") -> dict[str, Any]:
    """The request a submission would send, secrets redacted; `<region>`/`<account>` placeholders when unknown.

    For dry runs (`fit(dry_run=True)` prints the plan; this prints what SageMaker would receive)."""
    if args.role is None:
        args = args.model_copy(update={"role": "<role>"})
    assert args.role is not None
    target = target_for(plan, args, region=region or "<region>", account=account or "<account>", partition=partition,
                        role=role_at_submit(args.role, partition))
    return redact(build_request(plan, args, target))


def role_at_submit(role: str, partition: str = "aws") -> str | None:
    """For display: a role given by name is marked as resolved at submit, None for an ARN (shown as is).

    Submission asks IAM GetRole, which keeps the role's path (role/service-role/<name>); a display without AWS
    calls cannot know that path, so it must not pretend to know the ARN."""
    if role.startswith("arn:") or role == "<role>":
        return None
    return f"<resolved at submit by IAM GetRole: arn:{partition}:iam::<account>:role/[<path>/]{role}>"


def plan_for_container(plan: LaunchPlan, request: dict[str, Any]) -> LaunchPlan:
    """The plan as submitted: its hyperparameters are the request's (submit directory and region filled)."""
    return plan.model_copy(update={"sagemaker_hyperparameters": dict(request["HyperParameters"])})
