"""A v3 `ModelTrainer`'s arguments → our estimator arguments (SageMaker SDK v2 names), validated by our rules.

v3 checks almost nothing (sagemaker-v3.md §1.1); mapped onto the v2 spec a v3 job gets every rule the estimators
have (degrees vs world size, instance rules, ...), with each problem named by its v3 key path
(`distributed.smp.tensor_parallel_degree`, `compute.instance_count`). The mapping (sagemaker-v3.md §1.4):

  Torchrun(process_count_per_node=P)        → torch_distributed + mpi.processes_per_host P (the processes knob)
  Torchrun(smp=SMP(...))                    → SMP v2: torch_distributed + smdistributed.modelparallel parameters
  MPI(process_count_per_node=P, options)    → mpi {processes_per_host P, custom_mpi_options shlex-joined}
  Compute / StoppingCondition / ...         → instance_* / volume_size / max_run, max_wait / ...
  hyperparameters                           → the same, with hyperparameter_encoding "v3" (v3's argv,
                                              hyperparameters.json and SM_HP_* / SM_HPS: contract/v3_hyperparameters.py)
  base_job_name (given, else `<image repository>-job`) → the same with `_` as `-`, as v3 names its jobs
  v3's defaults: ml.m5.xlarge × 1, MaxRuntimeInSeconds 3600.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..contract.hyperparameters import HyperparameterEncoding
from ..errors import ErrorItem, ValidationError
from .error_items import from_pydantic, item, join_path, show
from .v3_objects import distributed_kind, plain, training_mode

if TYPE_CHECKING:  # pragma: no cover
    from .estimator_args import EstimatorArgs

FRAMEWORK = "pytorch"  # v3's distributed configs are torch's (torchrun, mpi4py, SMP v2): the PyTorch estimator's rules
DEFAULT_INSTANCE_TYPE = "ml.m5.xlarge"
DEFAULT_INSTANCE_COUNT = 1
DEFAULT_MAX_RUNTIME = 3600
REQUIREMENTS_FILE = "requirements.txt"  # what the container installs from source_dir (the toolkit's rule)

# (our key path, v3 key path), longest first: our rules' problems are reported under the v3 name the user wrote
_PATHS: tuple[tuple[str, str], ...] = (
    ("distribution.smdistributed.modelparallel.parameters", "distributed.smp"),
    ("distribution.smdistributed.modelparallel", "distributed.smp"),
    ("distribution.mpi.processes_per_host", "distributed.process_count_per_node"),
    ("distribution.mpi.custom_mpi_options", "distributed.mpi_additional_options"),
    ("distribution.instance_groups", "compute.instance_groups"),
    ("distribution", "distributed"),
    ("entry_point", "source_code.entry_script"),
    ("source_dir", "source_code.source_dir"),
    ("image_uri", "training_image"),
    ("instance_type", "compute.instance_type"),
    ("instance_count", "compute.instance_count"),
    ("instance_groups", "compute.instance_groups"),
    ("volume_size", "compute.volume_size_in_gb"),
    ("volume_kms_key", "compute.volume_kms_key_id"),
    ("keep_alive_period_in_seconds", "compute.keep_alive_period_in_seconds"),
    ("use_spot_instances", "compute.enable_managed_spot_training"),
    ("max_run", "stopping_condition.max_runtime_in_seconds"),
    ("max_wait", "stopping_condition.max_wait_time_in_seconds"),
    ("output_path", "output_data_config.s3_output_path"),
    ("output_kms_key", "output_data_config.kms_key_id"),
    ("disable_output_compression", "output_data_config.compression_type"),
    ("checkpoint_s3_uri", "checkpoint_config.s3_uri"),
    ("checkpoint_local_path", "checkpoint_config.local_path"),
    ("max_retry_attempts", "retry_strategy.maximum_retry_attempts"),
    ("input_mode", "training_input_mode"),
    ("subnets", "networking.subnets"),
    ("security_group_ids", "networking.security_group_ids"),
    ("enable_network_isolation", "networking.enable_network_isolation"),
    ("encrypt_inter_container_traffic", "networking.enable_inter_container_traffic_encryption"),
    ("inputs", "input_data_config"),
)


def v3_path(path: str) -> str:
    """Our key path as the v3 key path the user wrote (`distribution.mpi.processes_per_host` →
    `distributed.process_count_per_node`); paths with the same name in both stay."""
    for ours, theirs in _PATHS:
        if path == ours or path.startswith((ours + ".", ours + "[")):
            return theirs + path[len(ours):]
    return path


@dataclass
class TrainerJob:
    """A ModelTrainer's arguments, validated: our spec, the v3 data it came from (plain) and its channels' inputs."""

    spec: EstimatorArgs
    data: dict[str, Any]
    inputs: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)


# ---- reading --------------------------------------------------------------------------------------------------
def read_arguments(kwargs: dict[str, Any]) -> tuple[dict[str, Any], list[ErrorItem]]:
    """Every argument as plain data (jobspec/v3_objects.py), `distributed` with its `type`; what cannot be read."""
    errors: list[ErrorItem] = []
    data: dict[str, Any] = {}
    for key, value in kwargs.items():
        if value is None:
            continue
        try:
            data[key] = training_mode(value) if key == "training_mode" else plain(value)
        except RecursionError:
            errors.append(item(key, "contains a reference cycle (an object inside itself)"))
    if isinstance(data.get("hyperparameters"), str):
        loaded, problem = _hyperparameters_file(data["hyperparameters"])
        if problem is not None:
            errors.append(problem)
            del data["hyperparameters"]
        else:
            data["hyperparameters"] = loaded
    raw = kwargs.get("distributed")
    if raw is not None and isinstance(data.get("distributed"), dict):
        kind = distributed_kind(raw)
        if kind is None:
            errors.append(item("distributed", "cannot tell Torchrun from MPI: give Torchrun(...) or MPI(...), or a "
                                              "mapping with type: 'torchrun' or 'mpi'", raw))
            del data["distributed"]
        else:
            data["distributed"] = {**data["distributed"], "type": kind}
    return data, errors


def _hyperparameters_file(path: str) -> tuple[Any, ErrorItem | None]:
    """v3 also takes hyperparameters as the path of a JSON or YAML file holding a mapping."""
    import json

    import yaml

    from .safe_yaml import YamlLimitError, load

    try:
        text = open(path, encoding="utf-8").read()  # noqa: SIM115 - read at once
    except (OSError, ValueError) as exc:
        return None, item("hyperparameters", f"is read as the path of a JSON or YAML file, which cannot be read "
                                             f"({exc}); give a mapping or an existing file", path)
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = load(text)
        except (yaml.YAMLError, YamlLimitError) as exc:
            return None, item("hyperparameters", f"{path} is neither JSON nor YAML: {exc}", path)
    if not isinstance(data, dict):
        return None, item("hyperparameters", f"{path} must hold a mapping of names to values, got {show(data)}", path)
    return data, None


def _schema_errors(data: dict[str, Any]) -> list[ErrorItem]:
    """Unknown keys and wrong types, at v3 key paths (the distributed config against its own class)."""
    from pydantic import ValidationError as PydanticValidationError

    from .v3_configs import DISTRIBUTED_CLASSES, TrainerConfig

    errors: list[ErrorItem] = []
    rest = dict(data)
    distributed = rest.pop("distributed", None)
    if isinstance(distributed, dict):
        model = DISTRIBUTED_CLASSES[distributed["type"]]
        try:
            model.model_validate(distributed)
        except PydanticValidationError as exc:
            errors += from_pydantic(exc, model, prefix=("distributed",))
    elif distributed is not None:
        errors.append(item("distributed", f"must be Torchrun(...) or MPI(...), got {show(distributed)}", distributed))
    try:
        TrainerConfig.model_validate(rest)
    except PydanticValidationError as exc:
        errors += from_pydantic(exc, TrainerConfig)
    return errors


# ---- v3 → our arguments ---------------------------------------------------------------------------------------
def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _repository(image: Any) -> str:
    """v3's default base job name comes from the image's repository: `<account>.dkr.../pytorch-training:2.5` →
    `pytorch-training`."""
    text = image if isinstance(image, str) else "training"
    return text.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0] or "training"


def base_job_name(data: dict[str, Any]) -> str:
    """v3's `base_job_name`: as given, else `<image repository>-job` (TrainDefaults.get_base_job_name)."""
    given = data.get("base_job_name")
    return given if isinstance(given, str) and given else f"{_repository(data.get('training_image'))}-job"


def job_name_base(base: str) -> str:
    """The base v3 names its jobs from: `_` as `-` (sagemaker.train.utils._get_unique_name); SageMaker's job-name rule
    applies to what is left."""
    return base.replace("_", "-")


def _source(data: dict[str, Any], args: dict[str, Any]) -> list[ErrorItem]:
    errors = []
    code = _dict(data.get("source_code"))
    if "command" in code:
        errors.append(item("source_code.command",
                           "a shell command cannot be planned: the plan launches an entry script with the "
                           "distribution's launcher; give entry_script (and hyperparameters), or send the job "
                           "through `smdist serve`, which runs v3's own drivers", code["command"]))
    if "args" in code:
        errors.append(item("source_code.args", "not supported: the entry script's arguments are the "
                                               "hyperparameters (each becomes --key value); move them there",
                           code["args"]))
    requirements = code.get("requirements")
    if requirements is not None and requirements != REQUIREMENTS_FILE:
        errors.append(item("source_code.requirements",
                           f"the container installs {REQUIREMENTS_FILE} from source_dir (SageMaker's training "
                           f"toolkit rule); name the file {REQUIREMENTS_FILE!r}", requirements))
    patterns = code.get("ignore_patterns")
    if patterns is not None and (not isinstance(patterns, list) or not set(patterns) <= set(_default_patterns())):
        errors.append(item("source_code.ignore_patterns",
                           "only v3's defaults are accepted: the code archive leaves out .git, __pycache__ and "
                           ".ipynb_checkpoints (docs/sagemaker.md); move other files out of source_dir", patterns))
    if "entry_script" not in code and "command" not in code:
        errors.append(item("source_code.entry_script", "is required: the plan launches it on every host (give "
                                                      "SourceCode(source_dir=..., entry_script='train.py'))"))
    if "entry_script" in code:
        args["entry_point"] = code["entry_script"]
    if "source_dir" in code:
        args["source_dir"] = code["source_dir"]
    return errors


def _default_patterns() -> tuple[str, ...]:
    from .v3_configs import V3_DEFAULT_IGNORE_PATTERNS

    return V3_DEFAULT_IGNORE_PATTERNS


def _compute(data: dict[str, Any], args: dict[str, Any]) -> list[ErrorItem]:
    errors = []
    compute = _dict(data.get("compute"))
    groups = compute.get("instance_groups")
    if groups is not None:
        args["instance_groups"] = groups
    else:
        args["instance_type"] = compute.get("instance_type", DEFAULT_INSTANCE_TYPE)
        args["instance_count"] = compute.get("instance_count", DEFAULT_INSTANCE_COUNT)
    if groups is not None and ("instance_type" in compute or "instance_count" in compute):
        errors.append(item("compute.instance_groups", "give instance_groups or instance_type/instance_count, not "
                                                      "both", groups))
    renames = {"volume_size_in_gb": "volume_size", "volume_kms_key_id": "volume_kms_key",
               "keep_alive_period_in_seconds": "keep_alive_period_in_seconds",
               "enable_managed_spot_training": "use_spot_instances"}
    for theirs, ours in renames.items():
        if theirs in compute:
            args[ours] = compute[theirs]
    mode = data.get("training_mode")
    local_type = str(args.get("instance_type", "")).startswith("local")
    if mode == "LOCAL_CONTAINER" and groups is None and not local_type:
        errors.append(item("training_mode", "LOCAL_CONTAINER runs on this machine: give Compute(instance_type="
                                            "'local'), 'local_cpu' or 'local_gpu'", mode))
    return errors


def _distributed(data: dict[str, Any], args: dict[str, Any]) -> list[ErrorItem]:
    dist = data.get("distributed")
    if not isinstance(dist, dict):
        return []
    errors = []
    out: dict[str, Any] = {}
    count = dist.get("process_count_per_node")
    if dist["type"] == "mpi":
        out["mpi"] = {"enabled": True}
        options = dist.get("mpi_additional_options")
        if isinstance(options, list) and all(isinstance(o, str) for o in options):
            out["mpi"]["custom_mpi_options"] = shlex.join(options)  # split again with shlex: each option stays whole
    else:
        out["torch_distributed"] = {"enabled": True}
        smp = dist.get("smp")
        if isinstance(smp, dict):
            out["smdistributed"] = {"modelparallel": {"enabled": True, "parameters": smp}}
    if count is not None:
        out.setdefault("mpi", {})["processes_per_host"] = count
    groups = _dict(data.get("compute")).get("instance_groups")
    if isinstance(groups, list) and len(groups) > 1:
        errors.append(item("compute.instance_groups",
                           f"v3 runs {'torchrun' if dist['type'] == 'torchrun' else 'mpirun'} on every host of every "
                           "group; a plan runs the distribution on one group (the others run the script alone), so "
                           "this cannot be planned as v3 would run it: use one group, drop `distributed` (every host "
                           "runs the script), or send the job through `smdist serve`, which runs v3's own drivers",
                           [g.get("instance_group_name") if isinstance(g, dict) else g for g in groups]))
    elif isinstance(groups, list) and len(groups) == 1 and isinstance(groups[0], dict):
        out["instance_groups"] = [groups[0].get("instance_group_name")]
    args["distribution"] = out
    return errors


def _stopping(data: dict[str, Any], args: dict[str, Any]) -> None:
    stopping = _dict(data.get("stopping_condition"))
    args["max_run"] = stopping.get("max_runtime_in_seconds", DEFAULT_MAX_RUNTIME)
    if "max_wait_time_in_seconds" in stopping:
        args["max_wait"] = stopping["max_wait_time_in_seconds"]


def _outputs(data: dict[str, Any], args: dict[str, Any]) -> None:
    output = _dict(data.get("output_data_config"))
    if "s3_output_path" in output:
        args["output_path"] = output["s3_output_path"]
    if "kms_key_id" in output:
        args["output_kms_key"] = output["kms_key_id"]
    if output.get("compression_type") == "NONE":
        args["disable_output_compression"] = True
    checkpoint = _dict(data.get("checkpoint_config"))
    if "s3_uri" in checkpoint:
        args["checkpoint_s3_uri"] = checkpoint["s3_uri"]
    if "local_path" in checkpoint:
        args["checkpoint_local_path"] = checkpoint["local_path"]
    retry = _dict(data.get("retry_strategy"))
    if "maximum_retry_attempts" in retry:
        args["max_retry_attempts"] = retry["maximum_retry_attempts"]


def _service(data: dict[str, Any], args: dict[str, Any]) -> None:
    """Settings passed through to CreateTrainingJob under their v2 names."""
    networking = _dict(data.get("networking"))
    for theirs, ours in (("subnets", "subnets"), ("security_group_ids", "security_group_ids"),
                         ("enable_network_isolation", "enable_network_isolation"),
                         ("enable_inter_container_traffic_encryption", "encrypt_inter_container_traffic")):
        if theirs in networking:
            args[ours] = networking[theirs]
    if isinstance(data.get("tags"), list):
        args["tags"] = [{"Key": _dict(t).get("key"), "Value": _dict(t).get("value")} for t in data["tags"]]
    if isinstance(data.get("metric_definitions"), list):
        args["metric_definitions"] = [{"Name": _dict(m).get("name"), "Regex": _dict(m).get("regex")}
                                      for m in data["metric_definitions"]]
    same = ("role", "hyperparameters", "environment", "tensorboard_output_config", "enable_remote_debug",
            "enable_infra_check", "enable_session_tag_chaining")
    for key in same:
        if key in data:
            args[key] = data[key]
    if "training_input_mode" in data:
        args["input_mode"] = data["training_input_mode"]


def estimator_arguments(data: dict[str, Any]) -> tuple[dict[str, Any], list[ErrorItem]]:
    """Our estimator's arguments for a ModelTrainer's (plain) data, and what v3 has that cannot be mapped."""
    errors: list[ErrorItem] = []
    if "algorithm_name" in data:
        errors.append(item("algorithm_name", "marketplace and built-in algorithms are not supported: give "
                                             "training_image and source_code", data["algorithm_name"]))
    image = data.get("training_image")
    if image is None:
        errors.append(item("training_image", "is required, as in v3's ModelTrainer (it resolves no image from a "
                                             "framework version): give the training image URI, e.g. "
                                             "sagemaker.core.image_uris.retrieve(...)'s, or the smdist image"))
    args: dict[str, Any] = {"image_uri": image, "base_job_name": job_name_base(base_job_name(data)),
                            "hyperparameter_encoding": HyperparameterEncoding.V3}
    if image is None:
        del args["image_uri"]
    errors += _source(data, args)
    errors += _compute(data, args)
    errors += _distributed(data, args)
    _stopping(data, args)
    _outputs(data, args)
    _service(data, args)
    return args, errors


def input_channels(input_data_config: Any) -> tuple[dict[str, Any], list[ErrorItem]]:
    """`[InputData(channel_name, data_source)]` as fit()'s inputs mapping ({name: {uri, ...}})."""
    from pydantic import ValidationError as PydanticValidationError

    from .v3_configs import InputData

    raw = plain(input_data_config)
    if not isinstance(raw, list):
        return {}, [item("input_data_config", f"must be a list of InputData, got {show(input_data_config)}",
                         input_data_config)]
    channels: dict[str, Any] = {}
    errors: list[ErrorItem] = []
    for i, entry in enumerate(raw):
        path = f"input_data_config[{i}]"
        try:
            channel = InputData.model_validate(entry)
        except PydanticValidationError as exc:
            errors += from_pydantic(exc, InputData, prefix=("input_data_config", i))
            continue
        if channel.channel_name in channels:
            errors.append(item(join_path(path, "channel_name"), "names a channel given before; channel names are "
                                                                "unique", channel.channel_name))
            continue
        source = channel.data_source
        spec: dict[str, Any] = {"uri": source} if isinstance(source, str) else {"uri": source.s3_uri}
        if not isinstance(source, str) and source.s3_data_distribution_type:
            spec["distribution"] = source.s3_data_distribution_type
        if channel.content_type:
            spec["content_type"] = channel.content_type
        channels[channel.channel_name] = spec
    return channels, errors


# ---- validation -----------------------------------------------------------------------------------------------
def _overlaps(path: str, taken: set[str]) -> bool:
    return any(path == t or path.startswith((t + ".", t + "[")) or t.startswith((path + ".", path + "["))
               for t in taken)


def validate_trainer(kwargs: dict[str, Any], *, base_dir: str | None = None,
                     check_source: bool = True) -> TrainerJob:
    """A ModelTrainer's constructor arguments (v3's objects, ours, or mappings) validated by our schema and rules.

    Raises ValidationError listing every problem at its v3 key path."""
    from .validate import collect

    data, errors = read_arguments(kwargs)
    errors += _schema_errors(data)
    args, unmappable = estimator_arguments(data)
    errors += unmappable
    inputs: dict[str, Any] | None = None
    if "input_data_config" in data:
        inputs, input_errors = input_channels(kwargs["input_data_config"])
        errors += [e for e in input_errors if not _overlaps(e.path, {x.path for x in errors})]
    outcome = collect(FRAMEWORK, args, base_dir=base_dir or os.getcwd(), check_source=check_source)
    taken = {e.path for e in errors}
    for problem in outcome.errors:
        translated = item(v3_path(problem.path), problem.message, problem.value)
        if not _overlaps(translated.path, taken):
            errors.append(translated)
            taken.add(translated.path)
    if errors or outcome.spec is None:
        raise ValidationError(errors or [item("<root>", "the arguments could not be read")])
    return TrainerJob(spec=outcome.spec, data=data, inputs=inputs, warnings=outcome.warnings)
