"""Checks a plan must pass before anything is uploaded or created in AWS (no cost before the first error). Pure."""
from __future__ import annotations

import re

from ...container.host_resilience import RESILIENCE_ENV
from ...errors import ErrorItem, ValidationError
from ...jobspec.catalog import is_local, lookup
from ...jobspec.error_items import item, join_path, show
from ...jobspec.estimator_args import EstimatorArgs
from ...jobspec.image_catalog import NoImage
from ...plan.model import LaunchPlan
from .images import default_image_uri, image_instance_type
from .request import resilience_environment

# CreateTrainingJob limits (API reference): exceeding them fails the call after the code upload.
MAX_HYPERPARAMETERS = 100
MAX_HYPERPARAMETER_KEY = 256
MAX_HYPERPARAMETER_VALUE = 2500
MAX_ENVIRONMENT = 100
MAX_ENVIRONMENT_KEY = 512
MAX_ENVIRONMENT_VALUE = 512
# hyperparameters the request adds to the plan's
_REQUEST_HYPERPARAMETERS = ("sagemaker_submit_directory", "sagemaker_region")
_CHANNEL_NAME = re.compile(r"^[A-Za-z0-9.\-_]{1,64}$")
# Arguments this backend does not turn into request fields; silently dropping them would surprise.
_NOT_FORWARDED = {
    "profiler_config": "profiler configuration is not forwarded by the SageMaker backend; remove it",
    "rules": "SageMaker Debugger rules are not forwarded by the SageMaker backend; remove them",
}


def _code(plan: LaunchPlan, args: EstimatorArgs, region: str | None) -> list[ErrorItem]:
    out = []
    if args.role is None:
        out.append(item("role", f"is required to run on SageMaker ({plan.instance_type}): give the IAM execution role "
                                "ARN (arn:aws:iam::<account>:role/<name>) or a role name"))
    if not args.image_uri:
        try:
            uri = default_image_uri(args, plan.framework, lookup(image_instance_type(plan)), region or "us-east-1",
                                    plan.strategy)
        except NoImage as missing:
            out.append(item(missing.key, missing.message, missing.value))
        else:
            if uri is None:
                out.append(item("image_uri", "no training image can be derived from the framework and versions; "
                                             "give image_uri (the ECR image URI of your training container)"))
    for key, why in _NOT_FORWARDED.items():
        value = getattr(args, key)
        if value:
            out.append(item(key, why, value))
    if isinstance(args.debugger_hook_config, dict):
        out.append(item("debugger_hook_config", "a Debugger hook configuration is not forwarded by the SageMaker "
                                                "backend; remove it or set it to false", args.debugger_hook_config))
    return out


def _channels(plan: LaunchPlan, args: EstimatorArgs) -> list[ErrorItem]:
    out = []
    for name, channel in plan.channels.items():
        path = join_path("inputs", name)
        if not _CHANNEL_NAME.fullmatch(name):
            out.append(item(path, "channel names are 1-64 letters, digits, '.', '-' or '_'", name))
        if not channel.uri.startswith("s3://"):
            out.append(item(path, "SageMaker reads channels from S3 only; upload the data and give an s3:// URI",
                            channel.uri))
    model_channel = args.model_channel_name or "model"
    if args.model_uri is not None:
        if not args.model_uri.startswith("s3://"):
            out.append(item("model_uri", "must be an s3:// URI to run on SageMaker", args.model_uri))
        if model_channel in plan.channels:
            out.append(item(join_path("inputs", model_channel), f"duplicate channel: model_uri uses channel "
                            f"{model_channel!r}; rename the input or set model_channel_name", model_channel))
    if args.enable_network_isolation and "code" in plan.channels:
        out.append(item("inputs.code",
                        "with enable_network_isolation the code arrives in channel 'code'; rename the input"))
    return out


def _sized(section: str, values: dict[str, str], *, reserved: int, max_count: int, max_key: int, max_value: int,
           hint: str, show_values: bool) -> list[ErrorItem]:
    """API size limits of one map; `reserved` entries are the launcher's own."""
    out = []
    if len(values) + reserved > max_count:
        out.append(item(section, f"SageMaker takes at most {max_count - reserved} entries here (the launcher adds "
                                 f"{reserved}); got {len(values)}: {hint}"))
    for key, value in values.items():
        path = join_path(section, key)
        if len(key) > max_key:
            out.append(item(path, f"names are at most {max_key} characters"))
        if len(value) > max_value:
            # environment values may be secrets: then only the length is shown
            out.append(item(path, f"is {len(value)} characters; SageMaker takes at most {max_value}: {hint}",
                            *((show(value),) if show_values else ())))
    return out


def _limits(plan: LaunchPlan, reserved_env: int) -> list[ErrorItem]:
    hps = {k: v for k, v in plan.sagemaker_hyperparameters.items() if k not in _REQUEST_HYPERPARAMETERS}
    return [
        *_sized("hyperparameters", hps, reserved=len(_REQUEST_HYPERPARAMETERS), max_count=MAX_HYPERPARAMETERS,
                max_key=MAX_HYPERPARAMETER_KEY, max_value=MAX_HYPERPARAMETER_VALUE, show_values=True,
                hint="put large settings in a file in source_dir"),
        *_sized("environment", dict(plan.environment), reserved=reserved_env, max_count=MAX_ENVIRONMENT,
                max_key=MAX_ENVIRONMENT_KEY, max_value=MAX_ENVIRONMENT_VALUE, show_values=False,
                hint="pass large values in a file instead"),
    ]


def problems(plan: LaunchPlan, args: EstimatorArgs, *, reserved_env: int = 1,
             region: str | None = None) -> list[ErrorItem]:
    local = [t for t in plan.instance_types if is_local(t)]  # every instance group's type, not only the ranks'
    if local:
        return [item("instance_groups" if plan.instance_groups else "instance_type",
                     "local instance types run on this machine (backends.local), not on SageMaker", local[0])]
    return [*_code(plan, args, region), *_channels(plan, args), *_limits(plan, reserved_env), *_resilience(args)]


def _resilience(args: EstimatorArgs) -> list[ErrorItem]:
    """What SageMaker's RetryStrategy cannot express: said here, never dropped (docs/resilience.md)."""
    r = args.resilience
    if r is None:
        return []
    found = []
    if r.retry_on != "curable":
        found.append(item("resilience.retry_on", "SageMaker decides itself which failures its RetryStrategy "
                                                 "retries (max_retry_attempts); remove retry_on for SageMaker jobs",
                          r.retry_on))
    ours = ("needs smdist-train in the container (our image, docker/: it restarts ranks and watches their lines "
            "itself); a stock SageMaker image ignores it. Pass image_uri of the smdist image, or remove it")
    if r.log_monitoring and not args.image_uri:
        found.append(item("resilience.log_monitoring", f"SageMaker has no log monitoring: it {ours} "
                                                       "(max_run still ends a hung job)"))
    if r.process_restarts and not args.image_uri:
        found.append(item("resilience.process_restarts", f"SageMaker restarts whole jobs only: process restarts "
                                                         f"{ours}", r.process_restarts))
    encoded = resilience_environment(args).get(RESILIENCE_ENV, "")
    if len(encoded) > MAX_ENVIRONMENT_VALUE:
        found.append(item("resilience.log_monitoring", f"travels to the container as one Environment value of "
                                                       f"{len(encoded)} characters; SageMaker allows "
                                                       f"{MAX_ENVIRONMENT_VALUE}: use fewer or shorter patterns"))
    return found


def check(plan: LaunchPlan, args: EstimatorArgs, *, reserved_env: int = 1, region: str | None = None) -> None:
    """Raise ValidationError with every problem that would make the job fail to start."""
    found = problems(plan, args, reserved_env=reserved_env, region=region)
    if found:
        raise ValidationError(found)
