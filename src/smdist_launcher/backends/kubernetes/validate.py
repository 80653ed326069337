"""Every rendered object checked before anything is sent, the way the cluster would refuse it: one ValidationError
listing every problem, each path `Kind/name: key.path` (e.g. `TrainJob/mnist: spec.trainer.env[3].name`).

- TrainJob, JobSet: the typed models of `kubeflow-trainer-api` (generated from the Trainer v2.3.0 / JobSet OpenAPI):
  a strict walk of the object against the models (unknown fields, wrong types, missing required fields, with key
  paths), then the models' own `from_dict`. The CRDs' create-time CEL rule on the name and the webhooks' rules that
  matter (the torch plugin's reserved PET_* env, pod host names within 63 characters) are written out here.
- Service, Job: `kubernetes-validate`'s strict (no unknown fields) schemas for Kubernetes 1.33, every error listed.
- HyperPodPyTorchJob: the JSON schema of `sagemaker-hyperpod`'s pydantic model (exported from that SDK in its own
  environment: `$SMDIST_HYPERPOD_SCHEMA` or `hyperpod_schema=`), with jsonschema; without it, the few rules known
  here (nprocPerNode a string, replicaSpecs) only.

The API emulator refuses objects with this same function (`problems(obj)` gives them one by one)."""
from __future__ import annotations

import functools
import json
import os
import re
import types
import typing
from pathlib import Path
from typing import Any

from ...errors import ErrorItem, ValidationError

KUBERNETES_VERSION = "1.33"
HYPERPOD_SCHEMA_ENV = "SMDIST_HYPERPOD_SCHEMA"
# The Trainer's torch plugin sets these itself; its webhook refuses a TrainJob whose trainer.env sets any of them.
RESERVED_TRAINJOB_ENV = ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_RFC1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# core validation (1.33): IsEnvVarName for a container env name, IsConfigMapKey for a Secret key (secretKeyRef.key)
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
# Linux's MAX_ARG_STRLEN (32 pages): the most one NAME=value string (with its NUL) may hold at exec; a longer one
# (a plan of a few hundred hosts in SMDIST_PLAN_JSON) makes the container fail to start with E2BIG
MAX_ENV_STRING = 131072


def validate_manifests(objects: list[dict[str, Any]], *, hyperpod_schema: dict[str, Any] | None = None) -> None:
    """ValidationError (smdist_launcher.errors) listing every problem of every object; None when all are valid."""
    found: list[ErrorItem] = []
    for obj in objects:
        found.extend(problems(obj, hyperpod_schema=hyperpod_schema))
    if found:
        raise ValidationError(found, source="kubernetes manifests")


def problems(obj: Any, *, hyperpod_schema: dict[str, Any] | None = None) -> list[ErrorItem]:
    """Every problem of one object (what a 422 Invalid's causes list), each with its `Kind/name: path`."""
    if not isinstance(obj, dict):
        return [ErrorItem("<object>", "must be a mapping (a Kubernetes object)", obj)]
    kind, where = obj.get("kind"), _where(obj)
    check = _CHECKS.get(str(kind))
    if check is None:
        return [ErrorItem(f"{where}: kind", f"is not one of the kinds rendered here ({', '.join(_CHECKS)})", kind)]
    if kind == "HyperPodPyTorchJob":
        return _hyperpod(obj, where, hyperpod_schema)
    return check(obj, where)


def _where(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return f"{obj.get('kind', '<no kind>')}/{name if isinstance(name, str) else '<no name>'}"


def _item(where: str, path: str, message: str, value: Any = ...) -> ErrorItem:
    return ErrorItem(f"{where}: {path}" if path else where, message, *(() if value is ... else (value,)))


# ---- the typed models (TrainJob, JobSet): a strict walk, then from_dict ------------------------------------------


def _unwrap(annotation: Any) -> Any:
    """Optional[X] / Annotated[X, ...] → X."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            rest = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(rest) != 1:
                return Any
            annotation = rest[0]
        else:
            return annotation


def _type_name(annotation: Any) -> str:
    return {str: "a string", int: "an integer", bool: "a boolean", float: "a number"}.get(annotation, "an object")


def walk(model: Any, value: Any, path: str, where: str) -> list[ErrorItem]:
    """`value` checked against the pydantic model class or type `model`: unknown fields, wrong types and missing
    required fields, each with its key path (the generated models ignore unknown fields; the API server does not)."""
    from pydantic import BaseModel

    ann = _unwrap(model)
    origin = typing.get_origin(ann)
    if origin in (list, tuple):
        if not isinstance(value, list):
            return [_item(where, path, "must be a list", value)]
        (inner, *_) = typing.get_args(ann) or (Any,)
        return [e for i, v in enumerate(value) for e in walk(inner, v, f"{path}[{i}]", where)]
    if origin is dict:
        if not isinstance(value, dict):
            return [_item(where, path, "must be a mapping", value)]
        inner = typing.get_args(ann)[1] if typing.get_args(ann) else Any
        return [e for k, v in value.items() for e in walk(inner, v, f"{path}.{k}" if path else str(k), where)]
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        if not ann.model_fields or "actual_instance" in ann.model_fields:   # oneOf (Quantity, IntOrString): a
            # string or a number on the wire
            ok = isinstance(value, (str, int, float)) and not isinstance(value, bool)
            return [] if ok else [_item(where, path, "must be a string or a number", value)]
        if not isinstance(value, dict):
            return [_item(where, path, "must be a mapping", value)]
        fields = {(f.alias or n): f for n, f in ann.model_fields.items()}
        out: list[ErrorItem] = []
        for key, v in value.items():
            sub = f"{path}.{key}" if path else str(key)
            if key not in fields:
                out.append(_item(where, sub, f"unknown field (allowed: {', '.join(sorted(fields))})", v))
            elif v is not None:
                out.extend(walk(fields[key].annotation, v, sub, where))
        for key, f in fields.items():
            if f.is_required() and key not in value:
                out.append(_item(where, f"{path}.{key}" if path else key, "is required"))
        return out
    if ann is bool:
        return [] if isinstance(value, bool) else [_item(where, path, "must be a boolean", value)]
    if ann is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [_item(where, path, "must be an integer", value)]
    if ann is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [_item(where, path, "must be a number", value)]
    if ann is str:
        return [] if isinstance(value, str) else [_item(where, path, "must be a string", value)]
    return []   # datetime, Any, ...: left to from_dict


def _typed(model: Any, obj: dict[str, Any], where: str) -> list[ErrorItem]:
    out = walk(model, obj, "", where)
    if not out:   # what the walk does not cover (enums, formats): the models' own checks
        try:
            model.from_dict(obj)
        except (ValueError, TypeError) as exc:
            out.append(_item(where, "", f"refused by {model.__name__}: {str(exc).splitlines()[0]}"))
    return out


def _name_rules(obj: dict[str, Any], where: str, *, rfc1035: bool, pods: int | None,
                pod_host: str = "{name}-node-0-{index}") -> list[ErrorItem]:
    """The name rules the API server applies at create (CRD CEL, webhooks, core validation)."""
    name = (obj.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        return [_item(where, "metadata.name", "is required: a lower-case name", name)]
    pattern, what = (_RFC1035, "an RFC 1035 label (lower-case letters, digits and '-', starting with a letter, "
                               "ending with a letter or digit)") if rfc1035 else \
        (_RFC1123_LABEL, "an RFC 1123 label (lower-case letters, digits and '-', starting and ending with a "
                         "letter or digit)")
    out = []
    if not pattern.match(name):
        out.append(_item(where, "metadata.name", f"must be {what}", name))
    if len(name) > 63:
        out.append(_item(where, "metadata.name", f"must be at most 63 characters (it has {len(name)})", name))
    elif pods is not None:   # every pod's host name (JobSet: <name>-node-0-<i>; Indexed Job: <name>-<i>, set by
        # the Job controller) must be a DNS label too, or the pods are never created
        longest = pod_host.format(name=name, index=max(pods - 1, 0))
        if len(longest) > 63:
            out.append(_item(where, "metadata.name", f"is too long: the pods' host names (e.g. {longest}) must be at "
                             f"most 63 characters; use a job name of at most {63 - len(longest) + len(name)}", name))
    namespace = (obj.get("metadata") or {}).get("namespace")
    if namespace is not None and (not isinstance(namespace, str) or not _RFC1123_LABEL.match(namespace)
                                  or len(namespace) > 63):
        out.append(_item(where, "metadata.namespace", "must be an RFC 1123 label of at most 63 characters",
                         namespace))
    return out


def _env_rules(value: Any, where: str, path: str = "") -> list[ErrorItem]:
    """Every container env name and secretKeyRef key in the object, as core validation checks them at create (the
    schemas only say "a string"): a job's secret variable named `my token` would otherwise be refused by the API
    server after the code was staged."""
    out: list[ErrorItem] = []
    if isinstance(value, dict):
        for key, sub in value.items():
            here = f"{path}.{key}" if path else str(key)
            if key == "env" and isinstance(sub, list):
                for i, var in enumerate(sub):
                    name = var.get("name") if isinstance(var, dict) else None
                    if isinstance(name, str) and not _ENV_NAME.match(name):
                        out.append(_item(where, f"{here}[{i}].name", "must be an environment variable name (letters, "
                                         "digits, '_', '-' and '.', not starting with a digit)", name))
                    value_of = var.get("value") if isinstance(var, dict) else None
                    if isinstance(name, str) and isinstance(value_of, str) and \
                            len(f"{name}={value_of}".encode()) + 1 > MAX_ENV_STRING:
                        out.append(_item(where, f"{here}[{i}].value", f"is {len(value_of.encode())} bytes: one "
                                         f"environment string may hold at most {MAX_ENV_STRING} bytes (Linux's "
                                         "MAX_ARG_STRLEN), the container would not start; use fewer hosts per job"))
            if key == "secretKeyRef" and isinstance(sub, dict):
                secret_key = sub.get("key")
                if isinstance(secret_key, str) and not _SECRET_KEY.match(secret_key):
                    out.append(_item(where, f"{here}.key", "must be a Secret key (letters, digits, '_', '-' and '.', "
                                     "at most 253)", secret_key))
            out.extend(_env_rules(sub, where, here))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            out.extend(_env_rules(sub, where, f"{path}[{i}]"))
    return out


def _int_at(obj: Any, *keys: Any) -> int | None:
    for k in keys:
        if isinstance(obj, dict):
            obj = obj.get(k)
        elif isinstance(obj, list) and isinstance(k, int) and k < len(obj):
            obj = obj[k]
        else:
            return None
    return obj if isinstance(obj, int) and not isinstance(obj, bool) else None


def _trainjob(obj: dict[str, Any], where: str) -> list[ErrorItem]:
    from kubeflow_trainer_api.models import TrainerV1alpha1TrainJob

    out = _typed(TrainerV1alpha1TrainJob, obj, where)
    out += _name_rules(obj, where, rfc1035=True, pods=_int_at(obj, "spec", "trainer", "numNodes"))
    out += _env_rules(obj, where)
    env = ((obj.get("spec") or {}).get("trainer") or {}).get("env")
    for i, var in enumerate(env if isinstance(env, list) else []):
        if isinstance(var, dict) and var.get("name") in RESERVED_TRAINJOB_ENV:
            out.append(_item(where, f"spec.trainer.env[{i}].name", "must not be set: the Trainer's torch plugin sets "
                             f"{', '.join(RESERVED_TRAINJOB_ENV)} itself (its webhook refuses the TrainJob)",
                             var["name"]))
    return out


def _jobset(obj: dict[str, Any], where: str) -> list[ErrorItem]:
    from kubeflow_trainer_api.models import JobsetV1alpha2JobSet

    jobs = (obj.get("spec") or {}).get("replicatedJobs")
    pods = _int_at(jobs, 0, "template", "spec", "completions") if isinstance(jobs, list) else None
    return (_typed(JobsetV1alpha2JobSet, obj, where) + _name_rules(obj, where, rfc1035=True, pods=pods)
            + _env_rules(obj, where))


# ---- core kinds: kubernetes-validate's strict schemas ---------------------------------------------------------------


def _core(obj: dict[str, Any], where: str) -> list[ErrorItem]:
    out = [*_schema_errors(_core_validator(str(obj.get("apiVersion")), str(obj.get("kind"))), obj, where)]
    indexed = obj.get("kind") == "Job" and (obj.get("spec") or {}).get("completionMode") == "Indexed"
    pods = _int_at(obj, "spec", "completions") if indexed else None
    return out + _name_rules(obj, where, rfc1035=obj.get("kind") == "Service", pods=pods,
                             pod_host="{name}-{index}") + _env_rules(obj, where)


@functools.cache  # the schema file is 1.5 MB of JSON: read once per kind, not per object
def _core_validator(api_version: str, kind: str) -> Any:
    """kubernetes-validate's strict schema for the kind, as a jsonschema validator that lists every error (its own
    validate() stops at the first)."""
    import jsonschema
    import kubernetes_validate
    from kubernetes_validate.utils import schema_contents
    from referencing import Registry, Resource

    version = kubernetes_validate.utils.major_minor(KUBERNETES_VERSION)
    group = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    folder = f"kubernetes-json-schema/v{version}.0-local-strict"
    schema = schema_contents(f"{folder}/{kind.lower()}-{group}.json", KUBERNETES_VERSION)
    definitions = schema_contents(f"{folder}/_definitions.json", KUBERNETES_VERSION)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def _json_path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


def _deepest(err: Any) -> Any:
    """anyOf/oneOf (`X or null`): the alternative's error that reaches furthest into the object says what is wrong."""
    if not err.context:
        return err
    return max((_deepest(c) for c in err.context), key=lambda e: (len(e.absolute_path), -len(e.message)))


def _schema_errors(validator: Any, obj: dict[str, Any], where: str) -> list[ErrorItem]:
    out = []
    for err in sorted(validator.iter_errors(obj), key=lambda e: (list(map(str, e.absolute_path)), e.message)):
        best = _deepest(err)
        path = _json_path(best.absolute_path)
        extra = re.match(r"Additional properties are not allowed \((.*) (?:was|were) unexpected\)", best.message)
        if extra:
            for key in re.findall(r"'([^']+)'", extra.group(1)):
                out.append(_item(where, f"{path}.{key}" if path else key, "unknown field"))
            continue
        out.append(_item(where, path, best.message, best.instance))
    return out


# ---- HyperPodPyTorchJob: the SDK's model, exported as JSON schema ---------------------------------------------------


def hyperpod_schema_from_env() -> dict[str, Any] | None:
    path = os.environ.get(HYPERPOD_SCHEMA_ENV)
    return json.loads(Path(path).read_text()) if path else None


def _hyperpod(obj: dict[str, Any], where: str, schema: dict[str, Any] | None) -> list[ErrorItem]:
    import jsonschema

    out = _name_rules(obj, where, rfc1035=False, pods=None) + _env_rules(obj, where)
    if obj.get("apiVersion") != "sagemaker.amazonaws.com/v1":
        out.append(_item(where, "apiVersion", "must be sagemaker.amazonaws.com/v1", obj.get("apiVersion")))
    schema = schema if schema is not None else hyperpod_schema_from_env()
    spec = obj.get("spec")
    if schema is not None:   # the SDK's model describes the spec
        if not isinstance(spec, dict):
            return [*out, _item(where, "spec", "must be a mapping", spec)]
        out += _schema_errors(jsonschema.validators.Draft202012Validator(schema), spec, f"{where}: spec")
        out = [ErrorItem(e.path.replace(": spec: ", ": spec."), e.message, *((e.value,) if e.has_value else ()))
               for e in out]
        return out
    if not isinstance(spec, dict):   # without the SDK's schema: the rules known here
        return [*out, _item(where, "spec", "must be a mapping", spec)]
    if not isinstance(spec.get("nprocPerNode"), str):
        out.append(_item(where, "spec.nprocPerNode", "must be a string (e.g. \"8\")", spec.get("nprocPerNode")))
    if not isinstance(spec.get("replicaSpecs"), list) or not spec["replicaSpecs"]:
        out.append(_item(where, "spec.replicaSpecs", "must be a non-empty list", spec.get("replicaSpecs")))
    return out


# HyperPodPyTorchJob: _hyperpod (it takes the SDK's schema), called by problems() itself
_CHECKS = {"TrainJob": _trainjob, "JobSet": _jobset, "HyperPodPyTorchJob": _core, "Service": _core, "Job": _core}
