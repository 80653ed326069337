"""The wire: AWS JSON requests (X-Amz-Target: SageMaker.X / Logs_20140328.X in JSON 1.1, CloudWatch's
GraniteServiceVersion20100801.X in JSON 1.0, the protocol botocore picks for it) checked against botocore's own service
models, and errors in the API's JSON error shape ({"__type": code, "message": ...})."""
from __future__ import annotations

import functools
import json
from datetime import datetime
from typing import Any

TARGETS = {"SageMaker": "sagemaker", "Logs_20140328": "logs", "GraniteServiceVersion20100801": "cloudwatch"}
# The JSON version each service speaks (its service model's jsonVersion): the answer's Content-Type says it.
_JSON_VERSIONS = {"cloudwatch": "1.0"}


class ApiError(Exception):
    """An error answer: HTTP status, the API's error code and message."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status

    def body(self) -> bytes:
        return json.dumps({"__type": self.code, "message": self.message}).encode()


def offset_page(items: list[Any], token: Any, size: int, refused: ApiError) -> tuple[list[Any], str | None]:
    """The page a NextToken names (this server's tokens are the offset of the page's first item) and the next
    page's token, None after the last page. A token it never gave out is `refused`: int() would take "-3" (a page
    from the end), " 3" or "3_0", and 5,000 digits raised ValueError (a 500)."""
    text = str(token or "0")
    if not (text.isascii() and text.isdigit() and len(text) <= 18):
        raise refused
    start = int(text)
    return items[start: start + size], (str(start + size) if start + size < len(items) else None)


@functools.cache
def service_model(service: str) -> Any:
    from botocore.loaders import Loader
    from botocore.model import ServiceModel

    return ServiceModel(Loader().load_service_model(service, "service-2"), service_name=service)


def parse_target(target: str) -> tuple[str, str]:
    """'SageMaker.CreateTrainingJob' → ('sagemaker', 'CreateTrainingJob')."""
    prefix, _, operation = (target or "").partition(".")
    if prefix not in TARGETS or not operation:
        raise ApiError("UnknownOperationException", f"unknown X-Amz-Target {target!r}")
    return TARGETS[prefix], operation


def content_type(target: str) -> str:
    """The Content-Type of the answer to a request with this X-Amz-Target."""
    service = TARGETS.get((target or "").partition(".")[0], "")
    return f"application/x-amz-json-{_JSON_VERSIONS.get(service, '1.1')}"


def _timestamps(value: Any, shape: Any) -> Any:
    """JSON carries timestamps as epoch seconds; botocore's validator wants datetimes."""
    if shape is None:
        return value
    if shape.type_name == "timestamp" and isinstance(value, (int, float)):
        return datetime.fromtimestamp(value)
    if shape.type_name == "structure" and isinstance(value, dict):
        return {k: _timestamps(v, shape.members.get(k)) for k, v in value.items()}
    if shape.type_name == "list" and isinstance(value, list):
        return [_timestamps(v, shape.member) for v in value]
    if shape.type_name == "map" and isinstance(value, dict):
        return {k: _timestamps(v, shape.value) for k, v in value.items()}
    return value


def _timestamp_keys(value: Any, shape: Any, path: str = "") -> str:
    """The key paths of the timestamp values in a request, for the answer that one is out of range."""
    if shape is None:
        return ""
    if shape.type_name == "timestamp" and isinstance(value, (int, float)):
        return path
    found: list[str] = []
    if shape.type_name == "structure" and isinstance(value, dict):
        found = [_timestamp_keys(v, shape.members.get(k), f"{path}.{k}" if path else k) for k, v in value.items()]
    elif shape.type_name == "list" and isinstance(value, list):
        found = [_timestamp_keys(v, shape.member, f"{path}[{i}]") for i, v in enumerate(value)]
    elif shape.type_name == "map" and isinstance(value, dict):
        found = [_timestamp_keys(v, shape.value, f"{path}.{k}") for k, v in value.items()]
    return ", ".join(f for f in found if f)


def validate(service: str, operation: str, params: Any) -> None:
    """ValidationException unless `params` fit the operation's input shape: types and required members (botocore's
    own report), then every pattern, enum and length bound of the service model, and serve's S3-only rule
    (request_rules). The one check every request passes before any file or process is touched."""
    from botocore.exceptions import ParamValidationError
    from botocore.validate import validate_parameters

    from .request_rules import message, problems

    try:
        model = service_model(service).operation_model(operation)
    except Exception:  # noqa: BLE001 - botocore raises OperationNotFoundError
        raise ApiError("UnknownOperationException", f"{operation} is not a {service} operation") from None
    if not isinstance(params, dict):
        raise ApiError("SerializationException", "the request body is not a JSON object")
    if model.input_shape is None:
        return
    try:
        stamped = _timestamps(params, model.input_shape)
    except (OverflowError, ValueError, OSError) as exc:  # epoch seconds no datetime holds (1e30, NaN)
        keys = _timestamp_keys(params, model.input_shape)
        raise ApiError("ValidationException", f"a timestamp is out of range ({exc}): {keys}") from None
    try:
        validate_parameters(stamped, model.input_shape)
    except ParamValidationError as exc:
        raise ApiError("ValidationException", str(exc).replace("Parameter validation failed:\n", "")) from None
    found = list(problems(model.input_shape, params))
    if found:
        raise ApiError("ValidationException", message(found))


def encode(value: Any) -> Any:
    """Response values: datetimes as epoch seconds (JSON 1.1)."""
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [encode(v) for v in value]
    return value
