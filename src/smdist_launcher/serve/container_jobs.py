"""CreateTrainingJob requests that name their own command (`AlgorithmSpecification.ContainerEntrypoint`, what SDK
v3's `ModelTrainer` sends) and no `sagemaker_submit_directory`: run as container-command jobs
(jobspec/container_command.py → plan/container_command.py → container/container_command.py on each host).

What cannot run honestly here is refused at CreateTrainingJob (a ValidationException with the reason), never
half-run: hosts without a private /opt/ml, v3's MPI driver on the process backend (it writes /etc/environment and
binds port 22 of this machine), channels that are not S3, an entry point's arguments without an entry point.

The job-spec rules a v2 request meets apply here too (jobspec/container_command.py: the job name, S3 URIs, the
checkpoint path; channel names below), with the request's own key paths in the answer."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ErrorItem, ValidationError
from .request_keys import in_request_keys

if TYPE_CHECKING:  # pragma: no cover
    from ..backends.api import Submission
    from ..jobspec.container_command import ContainerCommandJob
    from ..plan.model import Channel, LaunchPlan
    from .settings import Settings

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
    """The request's channels; a name is checked before it names anything (it becomes input/data/<name>)."""
    from ..jobspec.inputs import channel_name_ok
    from ..jobspec.rules.arguments import s3_uri_problem
    from ..plan.model import Channel

    out: dict[str, Channel] = {}
    problems: list[ErrorItem] = []
    for i, c in enumerate(request.get("InputDataConfig") or []):
        name = c.get("ChannelName")
        if not channel_name_ok(name):
            problems.append(ErrorItem(f"InputDataConfig[{i}].ChannelName", "channel names are 1-64 letters, digits, "
                                      "'.', '-' and '_', not '.' or '..' (the channel is the folder input/data/<name>)",
                                      name))
            continue
        if name in out:
            problems.append(ErrorItem(f"InputDataConfig[{i}].ChannelName", "names a channel given before: channel "
                                      "names are unique within a job", name))
            continue
        source = (c.get("DataSource") or {}).get("S3DataSource")
        if source is None:
            problems.append(ErrorItem(f"InputDataConfig[{i}].DataSource",
                                      "only S3DataSource channels can be staged here (the hosts get S3 data through "
                                      "this machine's S3 server)", c.get("DataSource")))
            continue
        uri_problem = s3_uri_problem(str(source.get("S3Uri")))
        if uri_problem:
            problems.append(ErrorItem(f"InputDataConfig[{i}].DataSource.S3DataSource.S3Uri", uri_problem,
                                      source.get("S3Uri")))
            continue
        out[name] = Channel(uri=source["S3Uri"], content_type=c.get("ContentType"),
                            distribution=source.get("S3DataDistributionType", "FullyReplicated"))
    return out, problems


def channel_problems(request: dict[str, Any]) -> list[ErrorItem]:
    """What is wrong with a request's InputDataConfig, by request key (v2 requests too: their fit() inputs are a
    mapping, where a channel named twice silently replaced the first and a non-S3 channel was silently left out)."""
    return _channels(request)[1]


def _gpu_hosts(types: list[str]) -> bool:
    """Run as local_gpu: every instance type has GPUs and this machine has some (split between the hosts)."""
    from ..backends.local.addressing import visible_gpus
    from ..jobspec.catalog import is_known, lookup

    return bool(types) and all(is_known(t) and lookup(t).gpus > 0 for t in types) and bool(visible_gpus())


def container_job(request: dict[str, Any]) -> ContainerCommandJob:
    """The request as a ContainerCommandJob; ValidationError (the request's key paths) for what the rules refuse."""
    try:
        return _container_job(request)
    except ValidationError as exc:
        raise in_request_keys(exc) from None


def _container_job(request: dict[str, Any]) -> ContainerCommandJob:
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
        disable_output_compression=(request.get("OutputDataConfig") or {}).get("CompressionType") == "NONE" or None,
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
    try:
        job = container_job(request)
    except ValidationError as exc:
        problems += exc.errors
    else:
        problems += _shape_problems(job)
    if problems:
        raise ValidationError(problems)
    return build_container_command_plan(job, channels)


MAX_RUN = 28 * 24 * 3600   # SageMaker's limit on MaxRuntimeInSeconds (a v2 request meets it in estimator_args)


def _shape_problems(job: ContainerCommandJob) -> list[ErrorItem]:
    """What a v2 request's rules refuse and a command's model does not: more hosts than this machine holds (every
    simulated host is a process tree here; checked before the plan lists them, 10^30 of them would never be
    listed), a group name twice, a run longer than SageMaker allows."""
    from ..jobspec.local_capacity import capacity

    problems: list[ErrorItem] = []
    hosts, room = job.host_count, capacity()
    if hosts * 2 > room.processes:  # the command and one runtime per host
        key = "ResourceConfig.InstanceGroups" if job.instance_groups else "ResourceConfig.InstanceCount"
        problems.append(ErrorItem(key, f"{hosts:,} hosts: local mode runs every host on this machine, each a command "
                                       f"and a runtime, and it holds at most {room.processes:,} processes "
                                       f"({room.why})", hosts))
    seen: set[str] = set()
    for i, group in enumerate(job.instance_groups):
        if group.name in seen:
            problems.append(ErrorItem(f"ResourceConfig.InstanceGroups[{i}].InstanceGroupName", "is used by an "
                                      "earlier group; every instance group needs its own name", group.name))
        seen.add(group.name)
    if job.max_run is not None and job.max_run > MAX_RUN:
        problems.append(ErrorItem("StoppingCondition.MaxRuntimeInSeconds", f"must be ≤ {MAX_RUN} (28 days, "
                                  "SageMaker's limit)", job.max_run))
    return problems


_DRIVERS_KEY = f"InputDataConfig.{DRIVERS_CHANNEL}.{DISTRIBUTED_FILE}"
_DISTRIBUTED_LIMIT = 1 << 20   # v3 writes a model_dump of a few hundred bytes


def read_distributed(plan: LaunchPlan) -> bytes | None:
    """v3's distributed.json of the sm_drivers channel, read once (None: the job has no sm_drivers channel).
    ValidationError when there is one and its distributed.json cannot be read: what it would run is then unknown,
    and the check that needs it fails closed."""
    channel = plan.channels.get(DRIVERS_CHANNEL)
    if channel is None:
        return None
    from ..backends.storage import s3
    from ..backends.storage.locations import parse_location

    try:
        loc = parse_location(channel.uri.rstrip("/")).child(DISTRIBUTED_FILE)
        if loc.bucket is None:
            raise ValueError(f"{channel.uri} is not an s3:// location")
        body = s3.client().get_object(Bucket=loc.bucket, Key=loc.key)["Body"].read(_DISTRIBUTED_LIMIT + 1)
    except Exception as exc:  # noqa: BLE001 - no file, no access, no S3: refused, never run unchecked
        raise ValidationError([ErrorItem(_DRIVERS_KEY, f"cannot be read ({type(exc).__name__}: {exc}), so which "
                                         "SDK v3 driver the job runs is unknown; refused rather than run unchecked",
                                         channel.uri)]) from None
    if len(body) > _DISTRIBUTED_LIMIT:
        raise ValidationError([ErrorItem(_DRIVERS_KEY, f"is larger than {_DISTRIBUTED_LIMIT} bytes: not SDK v3's "
                                         "driver configuration", channel.uri)])
    return bytes(body)


def distributed_config(body: bytes | None) -> dict[str, Any]:
    """distributed.json's config ({} for no sm_drivers channel); ValidationError when it is not a JSON object."""
    if body is None:
        return {}
    try:
        config = json.loads(body or b"{}")
    except ValueError:
        config = None
    if not isinstance(config, dict):
        raise ValidationError([ErrorItem(_DRIVERS_KEY, "is not a JSON object, so which SDK v3 driver the job runs "
                                         "is unknown; refused rather than run unchecked", body[:200])])
    return config


def is_v3_mpi(config: dict[str, Any]) -> bool:
    """v3's MPI config (MPI(...).model_dump()) is the only one with mpi_additional_options."""
    return "mpi_additional_options" in config


def runnable_problems(plan: LaunchPlan, settings: Settings, drivers: bytes | None = None) -> list[ErrorItem]:
    """What this machine's backend cannot run honestly for the job (empty: it can). `drivers`: the job's
    distributed.json as read_distributed gave it (None: no sm_drivers channel)."""
    problems: list[ErrorItem] = []
    if settings.backend == "process":
        from ..container.host_isolation import ISOLATION_ENV, turned_off

        # the request's Environment reaches each host's runtime too: its ISOLATION_ENV turns the private /opt/ml off
        asked_off = turned_off(dict(plan.environment))
        if os.geteuid() != 0 or turned_off(dict(os.environ)) or asked_off:
            why = (f"the request's Environment.{ISOLATION_ENV}={plan.environment.get(ISOLATION_ENV)} turns host "
                   "isolation off" if asked_off else
                   f"{ISOLATION_ENV}={os.environ.get(ISOLATION_ENV)} turns host isolation off"
                   if turned_off(dict(os.environ)) else "serve does not run as root")
            problems.append(ErrorItem("AlgorithmSpecification.ContainerEntrypoint",
                                      f"a container command uses absolute /opt/ml paths, and the process backend's "
                                      f"hosts get no private /opt/ml here ({why}): every simulated host would share "
                                      "this machine's /opt/ml. Run serve as root, or with --backend netns or docker"))
        elif settings.run_as:
            # the private /opt/ml is a mount namespace each host's runtime makes, which needs root: hosts started as
            # the --run-as user cannot make it and would fail at start (the job would never run)
            problems.append(ErrorItem("AlgorithmSpecification.ContainerEntrypoint",
                                      "a container command (SDK v3) needs a private /opt/ml per host, which the "
                                      "process backend makes with a mount namespace only root can create, and serve "
                                      f"runs its hosts as --run-as {settings.run_as}: they could not start. Run serve "
                                      "with --backend netns or docker for container-command jobs under --run-as"))
        try:
            mpi = is_v3_mpi(distributed_config(drivers))
        except ValidationError as exc:
            return problems + exc.errors
        if mpi:
            problems.append(ErrorItem(f"InputDataConfig.{DRIVERS_CHANNEL}.{DISTRIBUTED_FILE}",
                                      "SDK v3's MPI driver starts sshd on port 22 and appends the whole environment "
                                      "(credentials included) to /etc/environment: on the process backend both are "
                                      "this machine's. Run serve with --backend netns or docker for MPI jobs"))
    return problems


def container_submission(plan: LaunchPlan, request: dict[str, Any] | None = None) -> Submission:
    """The plan and the policy the request gives it (its RetryStrategy, spot and metric definitions; SageMaker's API
    has no resilience key: the restart policy's defaults). The code arrives as the request's `code` channel, not a
    folder of ours."""
    from ..backends.api import RunPolicy, Submission

    request = request or {}
    policy = RunPolicy(
        max_run=plan.max_run or None,
        max_retry_attempts=(request.get("RetryStrategy") or {}).get("MaximumRetryAttempts"),
        use_spot_instances=bool(request.get("EnableManagedSpotTraining")),
        metric_definitions=tuple(dict(d) for d in
                                 (request.get("AlgorithmSpecification") or {}).get("MetricDefinitions") or []))
    return Submission(plan=plan, policy=policy)


@dataclass(frozen=True)
class CheckedCommand:
    """A container-command request that passed every check: its plan and, where the check read it, the
    distributed.json it saw (the hosts get these same bytes: pinned_plan)."""

    plan: LaunchPlan
    drivers: bytes | None = None


def checked_container_plan(request: dict[str, Any], settings: Settings) -> CheckedCommand:
    plan = container_plan(request)
    # read only where a check needs it (the process backend's MPI refusal); other backends stage the channel as is
    drivers = read_distributed(plan) if settings.backend == "process" else None
    problems = runnable_problems(plan, settings, drivers)
    if problems:
        raise ValidationError(problems)
    return CheckedCommand(plan, drivers)


def pinned_plan(checked: CheckedCommand, folder: Path) -> LaunchPlan:
    """The plan with its sm_drivers channel fetched into `folder` (serve's own) now, distributed.json replaced by the
    bytes the check read at CreateTrainingJob: what the hosts run is what was checked, whatever S3 holds since."""
    if checked.drivers is None:
        return checked.plan
    from ..backends.storage import s3
    from ..backends.storage.locations import parse_location

    channel = checked.plan.channels[DRIVERS_CHANNEL]
    loc = parse_location(channel.uri)
    client = s3.client()
    objects = [(key, rel) for key, rel in s3.list_objects(client, loc) if rel.as_posix() != DISTRIBUTED_FILE]
    folder.mkdir(parents=True, exist_ok=True)
    s3.download(client, loc, objects, folder)
    (folder / DISTRIBUTED_FILE).write_bytes(checked.drivers)
    pinned = channel.model_copy(update={"uri": folder.absolute().as_uri()})
    return checked.plan.model_copy(update={"channels": {**checked.plan.channels, DRIVERS_CHANNEL: pinned}})
