"""Rules on single arguments that pydantic's types cannot express: names, URIs, pairs that go together, unsupported
features."""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from ...contract.hyperparameters import HyperparameterEncoding
from ...contract.v3_hyperparameters import safe_serialize
from ...errors import ErrorItem
from ..catalog import is_local
from ..container_paths import checkpoint_local_path_problem
from ..error_items import item, join_path, show
from .context import RuleContext

# Matched with fullmatch: `re.match` with `$` lets a trailing newline through ("job\n").
_JOB_NAME = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REGION = re.compile(r"[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d{1,2}")
# CreateTrainingJob's RoleArn is an ARN; the SDK expands a bare IAM role name to one (Session.expand_role).
_ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}")
_ROLE_NAME = re.compile(r"[\w+=,.@-]{1,64}")
_S3 = re.compile(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?")
DEFAULT_MAX_RUN = 86400
# CreateTrainingJob's limits (its service model: HyperParameters, TrainingEnvironmentMap). Local runs keep them too:
# a plan that runs here must run there, and argv / environ cannot carry NUL characters anywhere.
MAX_HYPERPARAMETERS = 100
MAX_HYPERPARAMETER_KEY = 256
MAX_HYPERPARAMETER_VALUE = 2500       # of the JSON text SageMaker receives
MAX_ENVIRONMENT = 100
MAX_ENVIRONMENT_KEY = 512
MAX_ENVIRONMENT_VALUE = 512

_UNSUPPORTED = {
    "git_config": "code from git is not supported; clone the repository and point source_dir at it",
    "container_entry_point": "a custom container entry point would replace the launcher the plan describes; "
                             "not supported",
    "container_arguments": "custom container arguments would replace the launcher the plan describes; not supported",
    "training_recipe": "SageMaker training recipes are not supported; give entry_point and distribution instead",
    "recipe_overrides": "SageMaker training recipes are not supported",
}


def job_name_problem(name: str) -> str | None:
    if _JOB_NAME.fullmatch(name):
        return None
    return ("must be 1-63 letters, digits and hyphens, starting and ending with a letter or digit "
            f"(SageMaker's job-name rule), got {name!r}")


def s3_uri_problem(uri: str) -> str | None:
    """What is wrong with `uri` as an S3 location (None: nothing): s3://<bucket>/<key>, a lower-case bucket name."""
    if _S3.fullmatch(uri):
        return None
    return "must be an s3://<bucket>/<prefix> URI with a lower-case bucket name (no https://, file:// or path)"


def region_problem(region: str) -> str | None:
    if _REGION.fullmatch(region):
        return None
    return f"must be an AWS region such as 'us-west-2', got {show(region)}"


def _json_problem(value: Any) -> str | None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"must be JSON-encodable (SageMaker stores hyperparameters as JSON): {exc}"
    return None


def _size_problem(key: str, value: Any, encoding: HyperparameterEncoding) -> str | None:
    """SageMaker's per-entry limits on one hyperparameter (None when within), on the text the job's SDK sends: v2's
    JSON, v3's string as it is (anything else JSON)."""
    if "\x00" in key or (isinstance(value, str) and "\x00" in value):
        return "must not contain NUL characters (a process's arguments cannot carry them)"
    if len(key) > MAX_HYPERPARAMETER_KEY:
        return f"the name has {len(key)} characters; SageMaker allows at most {MAX_HYPERPARAMETER_KEY}"
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return None  # reported as not JSON-encodable below
    v3 = encoding is HyperparameterEncoding.V3
    encoded = len(safe_serialize(value) if v3 else json.dumps(value))
    if encoded > MAX_HYPERPARAMETER_VALUE:
        return (f"the value is {encoded:,} characters {'as SDK v3 sends it' if v3 else 'as JSON'}; SageMaker allows "
                f"at most {MAX_HYPERPARAMETER_VALUE:,}: pass large data as an input channel or a file in source_dir")
    return None


def _hyperparameters(ctx: RuleContext) -> Iterator[ErrorItem]:
    hyperparameters = ctx.args.hyperparameters or {}
    if len(hyperparameters) > MAX_HYPERPARAMETERS:
        yield item("hyperparameters", f"{len(hyperparameters)} hyperparameters; SageMaker allows at most "
                                      f"{MAX_HYPERPARAMETERS} (the launcher adds a few of its own): group related "
                                      "values into one JSON value or a config file")
    for key, value in hyperparameters.items():
        path = join_path("hyperparameters", key)
        size = _size_problem(key, value, ctx.args.hyperparameter_encoding)
        if size:
            yield item(path, size, value)
        elif not key.strip():
            yield item(path, "hyperparameter names must not be empty", key)
        elif key.startswith("sagemaker_"):
            yield item(path, "names starting with 'sagemaker_' are reserved for the launcher; rename it", value)
        elif key == "mp_parameters" and ctx.args.distribution and ctx.args.distribution.modelparallel_on:
            yield item(path,
                       "is set by the launcher from distribution.smdistributed.modelparallel.parameters; remove it",
                       value)
        elif key == "model_dir" and isinstance(getattr(ctx.args, "model_dir", None), str):
            yield item(path,
                       "is also given as the model_dir argument (which the launcher passes as this hyperparameter); "
                       "keep one", value)
        elif isinstance(value, float) and not math.isfinite(value):
            yield item(path, "must be a finite number", value)
        else:
            problem = _json_problem(value)
            if problem:
                yield item(path, problem, value)


def _environment(ctx: RuleContext) -> Iterator[ErrorItem]:
    environment = ctx.args.environment or {}
    if len(environment) > MAX_ENVIRONMENT:
        yield item("environment", f"{len(environment)} variables; SageMaker allows at most {MAX_ENVIRONMENT}")
    for key, value in environment.items():
        path = join_path("environment", key)
        if not _ENV_NAME.fullmatch(key):
            yield item(path, "environment variable names are letters, digits and '_', not starting with a digit", key)
        elif len(key) > MAX_ENVIRONMENT_KEY:
            yield item(path, f"the name has {len(key)} characters; SageMaker allows at most {MAX_ENVIRONMENT_KEY}")
        elif "\x00" in value:
            yield item(path, "must not contain NUL characters (a process's environment cannot carry them)")
        elif len(value) > MAX_ENVIRONMENT_VALUE:
            yield item(path, f"the value has {len(value):,} characters; SageMaker allows at most "
                             f"{MAX_ENVIRONMENT_VALUE}: pass large data as an input channel or a file", value)


def _checkpoint_uri(uri: str, remote_type: str | None) -> Iterator[ErrorItem]:
    """s3:// everywhere; in local mode (remote_type None: no ml.* type) also a folder on this machine (file:// or a
    path): the local backends restore every host's checkpoint folder from it at the start and save it back at the end,
    as SageMaker does with S3."""
    key = "checkpoint_s3_uri"
    if uri.startswith("s3://"):
        if not _S3.fullmatch(uri):
            yield item(key, "must be an s3://<bucket>/<prefix> URI with a lower-case bucket name", uri)
        return
    scheme = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://", uri)
    if scheme is not None and scheme.group(1) != "file":
        yield item(key, f"unsupported scheme {scheme.group(1)}://; use s3://<bucket>/<prefix>, or in local mode "
                        "file://<folder> or a folder path", uri)
    elif uri.strip() in ("", "file://"):
        yield item(key, "names no folder; use s3://<bucket>/<prefix>, or in local mode file://<folder> or a folder "
                        "path", uri)
    elif remote_type is not None:
        yield item(key, f"a folder on this machine works only with local instance types (local, local_cpu, "
                        f"local_gpu), not {remote_type}; SageMaker needs an s3://<bucket>/<prefix> URI", uri)


def _uris(ctx: RuleContext) -> Iterator[ErrorItem]:
    args = ctx.args
    local = ctx.instance_type is not None and is_local(ctx.instance_type)
    if args.output_path is not None:
        if args.output_path.startswith("file://"):
            if ctx.instance_type is not None and not local:
                yield item("output_path", "file:// output paths work only with local instance types; use an s3:// URI",
                           args.output_path)
        elif not _S3.fullmatch(args.output_path):
            yield item("output_path", "must be an s3://<bucket>/<prefix> URI (or file://<dir> in local mode)",
                       args.output_path)
    if args.code_location is not None and not _S3.fullmatch(args.code_location):
        yield item("code_location", "must be an s3://<bucket>/<prefix> URI with a lower-case bucket name",
                   args.code_location)
    if args.checkpoint_s3_uri is not None:
        # every group's type counts: a checkpoint folder is shared by all hosts, not only the distribution's
        types = [args.instance_type] if args.instance_type else [g.instance_type for g in args.instance_groups or []]
        remote = next((t for t in types if t and not is_local(t)), None)
        yield from _checkpoint_uri(args.checkpoint_s3_uri, remote)
    local_path = args.checkpoint_local_path
    problem = checkpoint_local_path_problem(local_path) if local_path is not None else None
    if problem:
        yield item("checkpoint_local_path", problem, local_path)
    if args.model_uri is not None and not (_S3.fullmatch(args.model_uri) or args.model_uri.startswith("file://")):
        yield item("model_uri", "must be an s3:// URI (or file:// in local mode)", args.model_uri)


def _names(ctx: RuleContext) -> Iterator[ErrorItem]:
    args = ctx.args
    if args.base_job_name is not None:
        problem = job_name_problem(args.base_job_name)
        if problem:
            yield item("base_job_name", problem, args.base_job_name)
    region = region_problem(args.region) if args.region is not None else None
    if region:
        yield item("region", region, args.region)
    if args.role is not None:
        problem = role_problem(args.role, local=_all_hosts_local(args))
        if problem:
            yield item("role", problem, args.role)


def role_problem(role: str, local: bool) -> str | None:
    """What is wrong with `role` as the job's execution role (None: nothing).

    SageMaker SDK v2's Session.expand_role returns any role containing "/" unchanged and looks a bare name up in IAM;
    LocalSession inherits it and its local client never reads the RoleArn. So in local mode anything with a "/"
    passes, as AWS's own toolkit and DLC local tests pass ``role="dummy/unused-role"``. A cloud job sends the role
    to CreateTrainingJob, which takes only an IAM role ARN: there a role must be an ARN or a name IAM can expand.
    """
    if _ROLE_ARN.fullmatch(role) or _ROLE_NAME.fullmatch(role):
        return None
    if local and "/" in role:
        return None
    if local:
        return ("must be an IAM role ARN (arn:aws:iam::<account>:role/<name>), a role name, or in local mode any "
                "value containing '/' (e.g. 'dummy/unused-role'), as the SageMaker SDK's local mode accepts")
    return "must be an IAM role ARN (arn:aws:iam::<account>:role/<name>) or a role name"


def _all_hosts_local(args: Any) -> bool:
    """True when every host's instance type is a local one (the SDK picks LocalSession for those); an unknown type
    (absent or dropped as invalid) counts as local, so a broken instance_type does not add a role error."""
    types = [args.instance_type] if args.instance_type else [g.instance_type for g in args.instance_groups or []]
    return all(is_local(t) for t in types if t)


def _pairs(ctx: RuleContext) -> Iterator[ErrorItem]:
    args = ctx.args
    if (args.subnets is None) != (args.security_group_ids is None):
        missing = "security_group_ids" if args.security_group_ids is None else "subnets"
        yield item(missing, "a custom VPC needs both subnets and security_group_ids; give both or neither")
    if args.max_wait is not None and not args.use_spot_instances:
        yield item("max_wait", "is only used with use_spot_instances: true; set it or remove max_wait", args.max_wait)
    if args.use_spot_instances and not (ctx.instance_type and is_local(ctx.instance_type)):
        if args.max_wait is None and "max_wait" not in ctx.broken:
            yield item("max_wait", "is required with use_spot_instances (seconds to wait for spot capacity plus "
                                   "training; ≥ max_run)")
        elif args.max_wait is not None and args.max_wait < (args.max_run or DEFAULT_MAX_RUN):
            yield item("max_wait", f"must be ≥ max_run ({args.max_run or DEFAULT_MAX_RUN} s)", args.max_wait)


def _unsupported(ctx: RuleContext) -> Iterator[ErrorItem]:
    for key, why in _UNSUPPORTED.items():
        value = getattr(ctx.args, key, None)
        if value is not None:
            yield item(key, why, value)
    compiler = ctx.args.compiler_config
    if compiler is not None and compiler.enabled:
        yield item("compiler_config", "SageMaker Training Compiler is not supported by smdist-launcher; remove it",
                   compiler.model_dump())


def check(ctx: RuleContext) -> Iterator[ErrorItem]:
    yield from _hyperparameters(ctx)
    yield from _environment(ctx)
    yield from _uris(ctx)
    yield from _names(ctx)
    yield from _pairs(ctx)
    yield from _unsupported(ctx)
