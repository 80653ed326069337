"""The SageMaker SDK's own argument objects, read by shape (duck typing) so `sagemaker` is never imported.

TrainingInput (its `.config` is the API's Channel fields), InstanceGroup (instance_group_name / instance_type /
instance_count attributes) and TensorBoardOutputConfig (s3_output_path / container_local_output_path) become the
plain mappings our models validate; anything else passes through unchanged and is validated as usual.
"""
from __future__ import annotations

from typing import Any

_GROUP_FIELDS = ("instance_group_name", "instance_type", "instance_count")


def is_training_input(value: Any) -> bool:
    return isinstance(getattr(value, "config", None), dict) and "DataSource" in value.config


def channel_from_training_input(value: Any) -> Any:
    """A TrainingInput as our channel mapping {uri, input_mode, content_type, distribution}; API fields we do not
    carry stay under their API names, so validation names them (unknown key) instead of dropping them silently."""
    config = dict(value.config)
    source = dict(config.pop("DataSource", {}))
    s3 = dict(source.pop("S3DataSource", {}) or {})
    out: dict[str, Any] = {"uri": s3.pop("S3Uri", None)}
    if s3.pop("S3DataType", "S3Prefix") != "S3Prefix":
        out["S3DataType"] = value.config["DataSource"]["S3DataSource"]["S3DataType"]
    if "S3DataDistributionType" in s3:
        out["distribution"] = s3.pop("S3DataDistributionType")
    out.update(s3)
    out.update(source)  # FileSystemDataSource and the like: reported as unknown keys
    renames = {"InputMode": "input_mode", "ContentType": "content_type"}
    for key, val in config.items():
        out[renames[key] if key in renames else key] = val
    return out


def is_instance_group(value: Any) -> bool:
    return not isinstance(value, dict) and all(hasattr(value, f) for f in _GROUP_FIELDS)


def instance_group_mapping(value: Any) -> dict[str, Any]:
    return {f: getattr(value, f) for f in _GROUP_FIELDS}


def _tensorboard(value: Any) -> Any:
    if isinstance(value, dict) or not hasattr(value, "s3_output_path"):
        return value
    out = {"s3_output_path": value.s3_output_path}
    local = getattr(value, "container_local_output_path", None)
    if local is not None:
        out["container_local_output_path"] = local
    return out


def plain_arguments(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Estimator keyword arguments with SDK objects replaced by mappings (and distribution's instance_groups by
    their names, which is what the SDK sends in sagemaker_distribution_instance_groups)."""
    out = dict(kwargs)
    groups = out.get("instance_groups")
    if isinstance(groups, (list, tuple)):
        out["instance_groups"] = [instance_group_mapping(g) if is_instance_group(g) else g for g in groups]
    if "tensorboard_output_config" in out:
        out["tensorboard_output_config"] = _tensorboard(out["tensorboard_output_config"])
    dist = out.get("distribution")
    if isinstance(dist, dict) and isinstance(dist.get("instance_groups"), (list, tuple)):
        dist = dict(dist)
        dist["instance_groups"] = [g.instance_group_name if is_instance_group(g) else g
                                   for g in dist["instance_groups"]]
        out["distribution"] = dist
    return out


def plain_inputs(inputs: Any) -> Any:
    """fit() inputs with TrainingInput objects (alone or as channel values) replaced by channel mappings."""
    if is_training_input(inputs):
        return {"training": channel_from_training_input(inputs)}
    if isinstance(inputs, dict):
        return {k: channel_from_training_input(v) if is_training_input(v) else v for k, v in inputs.items()}
    return inputs
