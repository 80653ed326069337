"""The job file (YAML or JSON): the estimator's arguments plus `framework`, optional `inputs` and `job_name`.

Relative paths in it (source_dir, entry_point, local inputs, SMP parameter files) are read from the file's folder.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ErrorItem, ValidationError
from .error_items import closest, did_you_mean, item, show
from .frameworks import FRAMEWORKS
from .inputs import collect_input_errors, normalize_inputs
from .validate import collect, emit_warnings

if TYPE_CHECKING:  # pragma: no cover
    from pydantic import BaseModel

    from .channel import Channel
    from .estimator_args import EstimatorArgs

JOB_FILE_KEYS = ("framework", "inputs", "job_name")


@dataclass(frozen=True)
class JobFile:
    """A validated job file."""

    path: str
    framework: str
    args: EstimatorArgs
    inputs: dict[str, Channel] = field(default_factory=dict)
    job_name: str | None = None

    @property
    def base_dir(self) -> str:
        return os.path.dirname(os.path.abspath(self.path))


@functools.cache
def job_file_model(framework: str) -> type[BaseModel]:
    """The pydantic schema of a job file for `framework` (for JSON Schema export; loading uses the same parts)."""
    # the schemas load here, not at import: the estimators import this module and their import must stay fast
    from pydantic import create_model

    from .channel_spec import ChannelSpec
    from .estimator_args import args_model_for

    base = args_model_for(framework)
    framework_type: Any = Literal[framework]  # built at run time: one literal per framework
    return create_model(
        f"{base.__name__.removesuffix('Args')}JobFile",
        __base__=base,
        framework=(framework_type, ...),
        job_name=(str | None, None),
        inputs=(str | dict[str, str | ChannelSpec] | None, None),
    )


def _read(path: str) -> Any:
    import yaml  # lazy, like everything only reading a file needs: the estimators import this module

    from . import safe_yaml

    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ValidationError([item("<root>", f"cannot read the job file: {exc.strerror or exc}")],
                              source=path) from None
    except UnicodeDecodeError as exc:
        raise ValidationError([item("<root>", f"the job file is not UTF-8 text ({exc.reason} at byte {exc.start})")],
                              source=path) from None
    try:
        return safe_yaml.load(text)
    except safe_yaml.YamlLimitError as exc:
        raise ValidationError(exc.items, source=path) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ValidationError([item("<root>", f"invalid YAML{where}: {problem}")], source=path) from None


def _job_file_key_hint(error: ErrorItem) -> ErrorItem:
    """An unknown top-level key that is a misspelt job-file key (`input:` for `inputs:`) says so."""
    if "." in error.path or not error.message.startswith("unknown key"):
        return error
    meant = closest(error.path, JOB_FILE_KEYS)
    return item(error.path, f"unknown key; did you mean {meant!r}?", error.value) if meant else error


def parse_job_file(data: Any, *, path: str, base_dir: str, check_source: bool = True,
                   check_inputs: bool = False) -> JobFile:
    """Validate already-loaded job-file data (a mapping). check_inputs: local input folders must exist (`smdist
    validate`; not `smdist plan`, whose pinned plans are checked where the data is absent)."""
    from .rules.arguments import job_name_problem  # lazy: the estimators import this module

    if not isinstance(data, dict):
        raise ValidationError([item("<root>",
                                    f"a job file is a mapping of estimator arguments plus framework, got {show(data)}",
                                    data)], source=path)
    errors: list[ErrorItem] = []
    framework = data.get("framework")
    if framework is None:
        errors.append(item("framework", f"is required: one of {', '.join(FRAMEWORKS)}"))
    elif framework not in FRAMEWORKS:
        errors.append(item("framework", f"must be one of {', '.join(FRAMEWORKS)}{did_you_mean(framework, FRAMEWORKS)}",
                           framework))
    job_name = data.get("job_name")
    if job_name is not None:
        problem = job_name_problem(job_name) if isinstance(job_name, str) else f"must be a string, got {show(job_name)}"
        if problem:
            errors.append(item("job_name", problem, job_name))
    if "sagemaker_session" in data:
        errors.append(item("sagemaker_session", "cannot be set in a job file (it is a Python object); remove it",
                           data["sagemaker_session"]))
    args = {k: v for k, v in data.items() if k not in JOB_FILE_KEYS and k != "sagemaker_session"}
    spec: EstimatorArgs | None = None
    found_warnings: list[str] = []
    # a misspelled framework should not hide the arguments' problems: check them as the framework it most likely means
    checked_as = framework if framework in FRAMEWORKS else closest(framework, FRAMEWORKS)
    if checked_as is not None:
        outcome = collect(checked_as, args, base_dir=base_dir, check_source=check_source)
        errors.extend(_job_file_key_hint(e) for e in outcome.errors)
        spec, found_warnings = outcome.spec, outcome.warnings
    raw_type = args.get("instance_type")
    instance_type = spec.instance_type if spec is not None else (raw_type if isinstance(raw_type, str) else None)
    errors.extend(collect_input_errors(data.get("inputs"), instance_type=instance_type, base_dir=base_dir,
                                       check_exists=check_inputs))
    if errors or spec is None or not isinstance(framework, str):
        raise ValidationError(errors, source=path)
    emit_warnings(found_warnings)
    inputs = normalize_inputs(data.get("inputs"), instance_type=instance_type, base_dir=base_dir)
    return JobFile(path=path, framework=framework, args=spec, inputs=inputs, job_name=job_name)


def merge_overrides(data: Any, overrides: dict[str, Any] | None) -> Any:
    """`data` with `overrides` merged in (nested mappings merged key by key; other values replaced)."""
    if not overrides or not isinstance(data, dict):
        return data
    out = dict(data)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_overrides(out[key], value)
        else:
            out[key] = value
    return out


def load_job_file(
    path: str | os.PathLike[str], *, overrides: dict[str, Any] | None = None, check_source: bool = True,
    check_inputs: bool = False,
) -> JobFile:
    """Read and validate a job file; ValidationError (source = the path) lists every problem.

    overrides: values merged over the file's before validation (CLI flags such as --instance-count), e.g.
    {"instance_count": 2, "distribution": {"mpi": {"processes_per_host": 2}}}.
    """
    path = os.fspath(path)
    data = merge_overrides(_read(path), overrides)
    return parse_job_file(data, path=path, base_dir=os.path.dirname(os.path.abspath(path)), check_source=check_source,
                          check_inputs=check_inputs)
