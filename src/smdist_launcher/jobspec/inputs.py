"""fit() inputs → channels: a str is the channel "training"; a dict maps channel names to a URI or
{uri, input_mode, ...}."""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from ..errors import ErrorItem, ValidationError
from .catalog import is_local
from .error_items import from_pydantic, item, join_path, show
from .sdk_objects import plain_inputs

if TYPE_CHECKING:  # pragma: no cover
    from .channel import Channel

DEFAULT_CHANNEL = "training"
# SageMaker's ChannelName rule, fullmatched (a trailing newline must not pass); "." and ".." are refused apart: the
# channel's folder is input/data/<name>.
_CHANNEL_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def _as_mapping(inputs: Any) -> Any:
    inputs = plain_inputs(inputs)  # the SDK's TrainingInput, alone or as a channel value
    if isinstance(inputs, str):
        return {DEFAULT_CHANNEL: {"uri": inputs}}
    if isinstance(inputs, dict):
        return {k: ({"uri": v} if isinstance(v, str) else v) for k, v in inputs.items()}
    return inputs


def _check_uri(path: str, uri: str, instance_type: str | None, base_dir: str | None,
               check_exists: bool) -> tuple[str | None, ErrorItem | None]:
    """The normalized URI, or an error."""
    if not uri.strip():
        return None, item(path, "must not be empty; give an s3:// URI, a file:// URI or a local path", uri)
    if "\x00" in uri:
        return None, item(path, "must not contain NUL characters", uri)
    match = _SCHEME.match(uri)
    scheme = match.group(1).lower() if match else None
    if scheme == "s3":
        if not re.fullmatch(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/.*)?", uri):
            return None, item(path,
                              "is not a valid S3 URI; expected s3://<bucket>/<prefix> with a lower-case bucket name",
                              uri)
        return uri, None
    if scheme not in (None, "file"):
        return None, item(path, f"unsupported URI scheme {scheme!r}; use s3://, file:// or a local path", uri)
    if instance_type is not None and not is_local(instance_type):
        return None, item(path, f"local data ({uri!r}) works only with instance_type local, local_cpu or local_gpu; "
                                 "upload it to S3 and give the s3:// URI", uri)
    local = local_path(uri, base_dir)
    if check_exists and not os.path.exists(local):
        return None, item(path, f"{local} does not exist{_relative_file_uri_note(uri)}; create it or fix the path", uri)
    return "file://" + local, None


def channel_name_ok(name: Any) -> bool:
    """A channel name that is SageMaker's and a plain folder name (not '.' or '..')."""
    return isinstance(name, str) and _CHANNEL_NAME.fullmatch(name) is not None and name not in (".", "..")


def local_path(uri: str, base_dir: str | None = None) -> str:
    """The absolute path of a local path or file:// URI; relative ones are resolved against ``base_dir`` (job files:
    the file's folder), else the current directory.

    ``file://data/train`` is read as the relative path ``data/train``, as SageMaker's local mode reads it (RFC 8089
    would call ``data`` a host, but a file:// URI can only reach this machine); ``file:///data/train`` is absolute.
    ``file://localhost/x`` is ``/x``.
    """
    rest = uri[len("file://"):] if uri.lower().startswith("file://") else uri
    if rest.lower().startswith("localhost/"):
        rest = rest[len("localhost"):]
    rest = os.path.expanduser(rest)
    return os.path.normpath(os.path.join(base_dir or os.getcwd(), rest))


def _relative_file_uri_note(uri: str) -> str:
    rest = uri[len("file://"):] if uri.lower().startswith("file://") else None
    if not rest or rest.startswith("/"):
        return ""
    return (f" (file://{rest} is the path {rest} relative to the current folder, or to the job file's folder, as in "
            f"SageMaker's local mode; an absolute path is file:///{rest}; files on another host are not reachable: "
            "copy them here or use s3://)")


def normalize_inputs(
    inputs: Any, *, instance_type: str | None = None, base_dir: str | None = None, check_exists: bool = False
) -> dict[str, Channel]:
    """Validate fit() inputs and return {channel name: Channel}. Raises ValidationError (paths `inputs.<name>...`).

    Local paths and file:// URIs become absolute file:/// URIs: relative ones are resolved against `base_dir` (job
    files: the file's folder), else the current directory (see local_path). check_exists: a local path that does
    not exist is an error (validating a job file), rather than a failure at run time.
    """
    errors = collect_input_errors(inputs, instance_type=instance_type, base_dir=base_dir, check_exists=check_exists)
    if errors:
        raise ValidationError(errors)
    return _normalized(inputs, instance_type, base_dir, check_exists)


def collect_input_errors(inputs: Any, *, instance_type: str | None = None, base_dir: str | None = None,
                         check_exists: bool = False) -> list[ErrorItem]:
    try:
        _normalized(inputs, instance_type, base_dir, check_exists)
    except _Problems as problems:
        return problems.errors
    return []


class _Problems(Exception):
    def __init__(self, errors: list[ErrorItem]) -> None:
        self.errors = errors


def _normalized(inputs: Any, instance_type: str | None, base_dir: str | None, check_exists: bool) -> dict[str, Channel]:
    if inputs is None:
        return {}
    # the schemas (pydantic) load with the first channel, not with the estimators that import this module
    from pydantic import ValidationError as PydanticValidationError

    from .channel import Channel
    from .channel_spec import ChannelSpec

    mapping = _as_mapping(inputs)
    if not isinstance(mapping, dict):
        raise _Problems([item("inputs", "must be a URI string or a mapping of channel name → URI or "
                                        f"{{uri, input_mode, content_type, distribution}}, got {show(inputs)}",
                              inputs)])
    errors: list[ErrorItem] = []
    channels: dict[str, Channel] = {}
    for name, value in mapping.items():  # one channel at a time, so every channel's problems are reported
        path = join_path("inputs", name)
        if not channel_name_ok(name):
            errors.append(item(path, "channel names are 1-64 characters of letters, digits, '.', '-' and '_', "
                                     "not '.' or '..' (the channel is the folder input/data/<name>)", name))
            continue
        try:
            spec = ChannelSpec.model_validate(value)
        except PydanticValidationError as exc:
            errors.extend(from_pydantic(exc, ChannelSpec, prefix=("inputs", name)))
            continue
        uri, problem = _check_uri(join_path(path, "uri"), spec.uri, instance_type, base_dir, check_exists)
        if problem or uri is None:
            errors.extend([problem] if problem else [])
            continue
        channels[name] = Channel(uri=uri, input_mode=spec.input_mode, content_type=spec.content_type,
                                 distribution=spec.distribution)
    if errors:
        raise _Problems(errors)
    return channels

