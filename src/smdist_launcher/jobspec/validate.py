"""validate_args: schema (pydantic) + rules, every problem reported at once as one ValidationError."""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ErrorItem, ValidationError, ValidationWarning
from .error_items import did_you_mean, from_pydantic, intended_loc, item, join_path, show
from .frameworks import FRAMEWORKS
from .rules import RuleContext, run_rules

if TYPE_CHECKING:  # pragma: no cover
    from pydantic import ValidationError as PydanticValidationError

    from .estimator_args import EstimatorArgs

# The schemas (estimator_args, distribution: pydantic) are imported inside the functions that validate: the
# estimators import this module, and `from smdist_launcher import PyTorch` must not pay for pydantic.

_MAX_PASSES = 6

# unknown top-level arguments with a better explanation than did-you-mean
_RENAMED_V1 = {"train_instance_type": "instance_type", "train_instance_count": "instance_count",
               "train_volume_size": "volume_size",
               "train_max_run": "max_run", "train_use_spot_instances": "use_spot_instances",
               "train_max_wait": "max_wait",
               "train_volume_kms_key": "volume_kms_key", "image_name": "image_uri", "distributions": "distribution"}
# unknown top-level arguments that are another API's name for an estimator argument (too far off for did-you-mean):
# an amazon-sagemaker-examples notebook passes env= to an estimator; SDK v2's estimators take environment=
_OTHER_NAMES = {"env": "environment"}
_NOT_CONSTRUCTOR = {
    "inputs": "inputs are given to fit(inputs=...), not to the estimator (a job file may have an inputs key)",
    "job_name": "the job name is given to fit(job_name=...) or plan(job_name=...) "
                "(a job file may have a job_name key)",
    "framework": "the framework is chosen by the estimator class (PyTorch, TensorFlow, ...) "
                 "or a job file's framework key",
}


def _explain_unknown(error: ErrorItem) -> ErrorItem:
    if not error.message.startswith("unknown key") or "." in error.path:
        return error
    if error.path in _RENAMED_V1:
        return item(error.path, f"is the SageMaker SDK v1 name; use {_RENAMED_V1[error.path]!r}", error.value)
    if error.path in _OTHER_NAMES:
        return item(error.path, f"unknown key; did you mean {_OTHER_NAMES[error.path]!r}?", error.value)
    if error.path in _NOT_CONSTRUCTOR:
        return item(error.path, f"unknown argument: {_NOT_CONSTRUCTOR[error.path]}", error.value)
    return error


@dataclass
class Outcome:
    """What validation found: the model (None if even a partial one could not be built), errors, warnings."""

    spec: EstimatorArgs | None
    errors: list[ErrorItem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _copy_containers(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _copy_containers(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_copy_containers(v) for v in data]
    return data


_GONE = object()


def _drop(data: dict[str, Any], loc: tuple[Any, ...]) -> bool:
    """Remove the value at `loc`, or the nearest existing ancestor entry if `loc` does not exist. True if removed."""
    parents: list[tuple[Any, Any]] = []
    node: Any = data
    for part in loc:
        if isinstance(node, dict) and part in node:
            parents.append((node, part))
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            parents.append((node, part))
            node = node[part]
        else:
            break
    if not parents:
        return False
    # when `loc` itself is absent (a "missing" error) this drops the whole entry that lacks it
    container, key = parents[-1]
    if isinstance(container, list):
        container[key] = _GONE
    else:
        del container[key]
    return True


def _prune(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _prune(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_prune(v) for v in data if v is not _GONE]
    return data


_PARAMETERS_LOC = ("distribution", "smdistributed", "modelparallel", "parameters")


def _inline_parameters_file(data: dict[str, Any], base: str) -> None:
    """Replace an SMP parameters file name by its content, so that a retry drops one bad key, not the whole file."""
    from .distribution import read_parameters_file

    node: Any = data
    for part in _PARAMETERS_LOC[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict) and isinstance(node.get("parameters"), str):
        try:
            node["parameters"] = read_parameters_file(node["parameters"], base)
        except ValueError:
            pass  # reported by the first pass; the retry drops it


def _given(data: Any, loc: tuple[Any, ...]) -> bool:
    for part in loc:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
            data = data[part]
        else:
            return False
    return True


def _broken_paths(exc: PydanticValidationError, model: type[EstimatorArgs], data: dict[str, Any]) -> frozenset[str]:
    """Paths whose values pydantic rejected, so rules must not reason about them. An unknown key stands for the real
    key it probably meant (a misspelling or misplacement) unless that key is given too; a stray key hides nothing."""
    out: set[str] = set()
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if p != "[key]")
        if err["type"] == "extra_forbidden":
            meant = intended_loc(model, loc)
            if meant is None or _given(data, meant):
                continue
            loc = meant
        out.add(join_path(*loc))
    return frozenset(out)


def _best_effort(
    model: type[EstimatorArgs], data: dict[str, Any], context: dict[str, Any]
) -> tuple[EstimatorArgs | None, list[ErrorItem], frozenset[str]]:
    """Validate; on errors, drop the offending values and retry so the rules can still see the rest.

    Returns the model, the errors to report and the broken paths (see _broken_paths)."""
    from pydantic import ValidationError as PydanticValidationError

    reported: list[ErrorItem] = []
    broken: frozenset[str] = frozenset()
    current = _copy_containers(data)
    for attempt in range(_MAX_PASSES):
        try:
            return model.model_validate(current, context=context), reported, broken
        except PydanticValidationError as exc:
            if attempt == 0:
                reported = from_pydantic(exc, model)
                broken = _broken_paths(exc, model, current)
                _inline_parameters_file(current, context["base_dir"])
            locs = sorted((tuple(e["loc"]) for e in exc.errors(include_url=False)), key=len, reverse=True)
            removed = False
            for loc in locs:
                clean = tuple(p for p in loc if p != "[key]")
                removed = _drop(current, clean) or removed
            current = _prune(current)
            if not removed:
                break
    return None, reported, broken


def _overlaps(path: str, broken: frozenset[str]) -> bool:
    return any(path == b or path.startswith((b + ".", b + "[")) or b.startswith((path + ".", path + "["))
               for b in broken)


def collect(
    framework: str, args: Any, *, base_dir: str | None = None, check_source: bool = True
) -> Outcome:
    """Validate without raising: the job-file loader merges these errors with its own."""
    if framework not in FRAMEWORKS:
        return Outcome(None, [item("framework",
                                   f"must be one of {', '.join(FRAMEWORKS)}{did_you_mean(framework, FRAMEWORKS)}",
                                   framework)])
    if not isinstance(args, dict):
        return Outcome(None, [item("<root>",
                                   "estimator arguments must be a mapping of argument names to values, "
                                   f"got {show(args)}",
                                   args)])
    from .estimator_args import args_model_for

    base = os.path.abspath(base_dir) if base_dir else os.getcwd()
    model = args_model_for(framework)
    try:
        spec, errors, broken = _best_effort(model, args, {"base_dir": base})
    except RecursionError:
        return Outcome(None, [item("<root>", "the arguments contain a reference cycle (a dict or list inside itself)")])
    errors = [_explain_unknown(e) for e in errors]
    if spec is None:
        return Outcome(None, errors)
    spec.with_base_dir(base)
    ctx = RuleContext(spec, framework, broken=broken, check_source=check_source)
    seen = {(e.path, e.message) for e in errors}
    for problem in run_rules(ctx):
        key = (problem.path, problem.message)
        if key in seen or _overlaps(problem.path, broken):
            continue
        seen.add(key)
        errors.append(problem)
    return Outcome(spec if not errors else None, errors, ctx.warnings)


def validate_args(
    framework: str, args: Any, *, source: str | None = None, base_dir: str | None = None, check_source: bool = True
) -> EstimatorArgs:
    """The validated argument model of `framework`, or ValidationError listing every problem.

    base_dir: folder relative source_dir / entry_point / parameter files are read from (default: the working directory).
    check_source: check that the entry point exists (the only file-system check).
    Suspicious but legal settings are reported with warnings.warn(..., ValidationWarning).
    """
    outcome = collect(framework, args, base_dir=base_dir, check_source=check_source)
    if outcome.errors or outcome.spec is None:
        raise ValidationError(outcome.errors, source=source)
    emit_warnings(outcome.warnings)
    return outcome.spec


def emit_warnings(messages: list[str]) -> None:
    for message in messages:
        warnings.warn(message, ValidationWarning, stacklevel=3)
