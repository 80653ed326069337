"""CreateTrainingJob requests that name their own command (`AlgorithmSpecification.ContainerEntrypoint`, what SDK
v3's `ModelTrainer` sends) and no `sagemaker_submit_directory`: run as container-command jobs
(jobspec/container_command.py → plan/container_command.py → container/container_command.py on each host).

What cannot run honestly here is refused at CreateTrainingJob (a ValidationException with the reason), never
half-run: hosts without a private /opt/ml, v3's MPI driver on the process backend (it writes /etc/environment and
binds port 22 of this machine), channels that are not S3, an entry point's arguments without an entry point."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ErrorItem, ValidationError

if TYPE_CHECKING:  # pragma: no cover
    from ..backends.api import Submission
    from ..jobspec.container_command import ContainerCommandJob
    from ..plan.model import Channel, LaunchPlan
    from .jobs import Settings

_SUBMIT_HP = "sagemaker_submit_directory"
# v3's driver channel: `distributed.json` says which driver sm_train.sh runs (MPI: it has mpi_additional_options)
DRIVERS_CHANNEL = "sm_drivers"
DISTRIBUTED_FILE = "distributed.json"
# what SDK v3 recipes (ModelTrainer.from_recipe) send when no training_image was given
PLACEHOLDER_IMAGES = ("dummy_image",)


def placeholder_image_problem(request: dict[str, Any]) -> ErrorItem | None:
    image = (request.get("AlgorithmSpecification") or {}).get("TrainingImage")
    if image in PLACEHOLDER_IMAGES:
        return ErrorItem("AlgorithmSpecification.TrainingImage",
                         f"{image!r} is not an image: SDK v3's ModelTrainer.from_recipe sends it when no "
                         "training_image is given; pass training_image= (e.g. the smdist image, or an image URI "
                         "from sagemaker.core.image_uris.retrieve)", image)
    return None


def image_entrypoint_problem(request: dict[str, Any]) -> ErrorItem | None:
    """A request naming neither code of ours (sagemaker_program / sagemaker_submit_directory) nor a command: it
    runs its image's own entry point, and images are not run here."""
    spec = request.get("AlgorithmSpecification") or {}
    hps = request.get("HyperParameters") or {}
    if spec.get("ContainerEntrypoint") or spec.get("ContainerArguments") or _SUBMIT_HP in hps \
            or "sagemaker_program" in hps:
        return None
    return ErrorItem("AlgorithmSpecification", "names no ContainerEntrypoint and no code (no sagemaker_program or "
                     "sagemaker_submit_directory hyperparameter): the job would run its image's own entry point, and "
                     "images are not pulled or run here; send ContainerEntrypoint (SDK v3 does) or an SDK v2 "
                     "framework estimator's request")


def is_container_command(request: dict[str, Any]) -> bool:
    spec = request.get("AlgorithmSpecification") or {}
    has_submit = _SUBMIT_HP in (request.get("HyperParameters") or {})
    return bool(spec.get("ContainerEntrypoint") or spec.get("ContainerArguments")) and not has_submit


def _channels(request: dict[str, Any]) -> tuple[dict[str, Channel], list[ErrorItem]]:
    from ..plan.model import Channel

    out: dict[str, Channel] = {}
    problems: list[ErrorItem] = []
    for i, c in enumerate(request.get("InputDataConfig") or []):
        source = (c.get("DataSource") or {}).get("S3DataSource")
        if source is None:
            problems.append(ErrorItem(f"InputDataConfig[{i}].DataSource",
                                      "only S3DataSource channels can be staged here (the hosts get S3 data through "
                                      "this machine's S3 server)", c.get("DataSource")))
            continue
        out[c["ChannelName"]] = Channel(uri=source["S3Uri"], content_type=c.get("ContentType"),
                                        distribution=source.get("S3DataDistributionType", "FullyReplicated"))
    return out, problems


def _gpu_hosts(types: list[str]) -> bool:
    """Run as local_gpu: every instance type has GPUs and this machine has some (split between the hosts)."""
    from ..backends.local.addressing import visible_gpus
    from ..jobspec.catalog import is_known, lookup

    return bool(types) and all(is_known(t) and lookup(t).gpus > 0 for t in types) and bool(visible_gpus())


def container_job(request: dict[str, Any]) -> ContainerCommandJob:
    from ..jobspec.container_command import ContainerCommandJob

    spec = request.get("AlgorithmSpecification") or {}
    resources = request.get("ResourceConfig") or {}
    groups = [{"name": g["InstanceGroupName"], "instance_type": g["InstanceType"],
               "instance_count": int(g["InstanceCount"])} for g in resources.get("InstanceGroups") or []]
    types = [g["instance_type"] for g in groups] or [resources.get("InstanceType") or ""]
    return ContainerCommandJob.checked(
        job_name=request["TrainingJobName"], entrypoint=list(spec.get("ContainerEntrypoint") or []),
        arguments=list(spec.get("ContainerArguments") or []), image=spec.get("TrainingImage") or "",
        instance_type="local_gpu" if _gpu_hosts(types) else "local",
        instance_count=int(resources.get("InstanceCount") or 1), instance_groups=groups,
        hyperparameters={str(k): str(v) for k, v in (request.get("HyperParameters") or {}).items()},
        environment=dict(request.get("Environment") or {}),
        max_run=(request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds"),
        output_path=(request.get("OutputDataConfig") or {}).get("S3OutputPath"),
        checkpoint_s3_uri=(request.get("CheckpointConfig") or {}).get("S3Uri"),
        checkpoint_local_path=(request.get("CheckpointConfig") or {}).get("LocalPath"))


def container_plan(request: dict[str, Any]) -> LaunchPlan:
    """The plan of a container-command request; ValidationError for what the request gets wrong."""
    from ..plan.container_command import build_container_command_plan

    problems: list[ErrorItem] = []
    spec = request.get("AlgorithmSpecification") or {}
    if spec.get("ContainerArguments") and not spec.get("ContainerEntrypoint"):
        problems.append(ErrorItem("AlgorithmSpecification.ContainerArguments",
                                  "arguments for the image's own entry point: images are not run here, so give "
                                  "ContainerEntrypoint too", spec["ContainerArguments"]))
    channels, channel_problems = _channels(request)
    problems += channel_problems
    if problems:
        raise ValidationError(problems)
    return build_container_command_plan(container_job(request), channels)


def distributed_config(plan: LaunchPlan) -> dict[str, Any]:
    """v3's distributed.json from the sm_drivers channel ({} when there is none or it cannot be read)."""
    channel = plan.channels.get(DRIVERS_CHANNEL)
    if channel is None or not channel.uri.startswith("s3://"):
        return {}
    from ..backends.storage import s3
    from ..backends.storage.locations import parse_location

    loc = parse_location(channel.uri.rstrip("/")).child(DISTRIBUTED_FILE)
    try:
        assert loc.bucket is not None
        body = s3.client().get_object(Bucket=loc.bucket, Key=loc.key)["Body"].read()
        config = json.loads(body or b"{}")
    except Exception:  # noqa: BLE001 - no file, no access, not JSON: no driver we know of to check
        return {}
    return config if isinstance(config, dict) else {}


def is_v3_mpi(config: dict[str, Any]) -> bool:
    """v3's MPI config (MPI(...).model_dump()) is the only one with mpi_additional_options."""
    return "mpi_additional_options" in config


def runnable_problems(plan: LaunchPlan, settings: Settings) -> list[ErrorItem]:
    """What this machine's backend cannot run honestly for the job (empty: it can)."""
    problems: list[ErrorItem] = []
    if settings.backend == "process":
        from ..container.host_isolation import ISOLATION_ENV, turned_off

        if os.geteuid() != 0 or turned_off(dict(os.environ)):
            why = (f"{ISOLATION_ENV}={os.environ.get(ISOLATION_ENV)} turns host isolation off"
                   if turned_off(dict(os.environ)) else "serve does not run as root")
            problems.append(ErrorItem("AlgorithmSpecification.ContainerEntrypoint",
                                      f"a container command uses absolute /opt/ml paths, and the process backend's "
                                      f"hosts get no private /opt/ml here ({why}): every simulated host would share "
                                      "this machine's /opt/ml. Run serve as root, or with --backend netns or docker"))
        if is_v3_mpi(distributed_config(plan)):
            problems.append(ErrorItem(f"InputDataConfig.{DRIVERS_CHANNEL}.{DISTRIBUTED_FILE}",
                                      "SDK v3's MPI driver starts sshd on port 22 and appends the whole environment "
                                      "(credentials included) to /etc/environment: on the process backend both are "
                                      "this machine's. Run serve with --backend netns or docker for MPI jobs"))
    return problems


@dataclass(frozen=True)
class ContainerSettings:
    """What the backend reads of a container-command request besides its plan (Submission.settings): the metric
    definitions its lines are parsed with, and the attempts RetryStrategy gives it (spot: a preemption is retried)."""

    metric_definitions: list[dict[str, str]]
    max_retry_attempts: int | None
    use_spot_instances: bool
    resilience: None = None   # SageMaker's API has no resilience key: the restart policy's defaults


def container_submission(plan: LaunchPlan, request: dict[str, Any] | None = None) -> Submission:
    """The plan and the request's settings: the code arrives as the request's `code` channel, not a folder of ours."""
    from ..backends.api import Submission

    request = request or {}
    settings = ContainerSettings(
        metric_definitions=list((request.get("AlgorithmSpecification") or {}).get("MetricDefinitions") or []),
        max_retry_attempts=(request.get("RetryStrategy") or {}).get("MaximumRetryAttempts"),
        use_spot_instances=bool(request.get("EnableManagedSpotTraining")))
    return Submission(plan=plan, settings=settings)


def checked_container_plan(request: dict[str, Any], settings: Settings) -> LaunchPlan:
    plan = container_plan(request)
    problems = runnable_problems(plan, settings)
    if problems:
        raise ValidationError(problems)
    return plan
