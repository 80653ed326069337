"""Fuzzing validate_args with ≥ 2,000 mutated distribution dicts and estimator arguments.

The only exception ever raised must be ValidationError, every ErrorItem must name a path and say something,
and whatever validates must also resolve and plan.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from smdist_launcher.errors import ValidationError
from smdist_launcher.jobspec import resolve, validate_args
from smdist_launcher.jobspec.catalog import known_instance_types
from smdist_launcher.jobspec.strategy import MULTI_PROCESS
from smdist_launcher.plan.planner import build_plan

from .fuzz_strategies import SEED_DISTRIBUTIONS, mutated, values

ARG_VALUES = {
    "instance_type": st.sampled_from([*known_instance_types()[:40], "ml.p4d.24xlarg", "local-gpu", "",
                                      "ml.trn1.32xlarge"]),
    "instance_count": st.one_of(st.integers(-1, 1100), st.text(max_size=3), st.none()),
    "framework_version": st.sampled_from(["2.3", "1.12", "1.9", "2", "x", "2.3.1.1.1", None]),
    "py_version": st.sampled_from(["py311", "py3", "py2", "python3", None]),
    "image_uri": st.sampled_from([None, "123.dkr.ecr.us-west-2.amazonaws.com/img:1"]),
    "entry_point": st.sampled_from(["train.py", "run.sh", "missing.py", "../train.py", "/abs.py", "", "\x00"]),
    "source_dir": st.sampled_from(["SRC", "s3://bucket/code.tar.gz", "nowhere", None]),
    "hyperparameters": values,
    "environment": values,
    "use_spot_instances": st.booleans(),
    "max_wait": st.one_of(st.none(), st.integers(-1, 200000)),
    "output_path": st.sampled_from([None, "s3://bucket/out", "file:///tmp/out", "http://x", "s3://B"]),
    "instance_groups": st.one_of(st.none(), values,
                                 st.just([{"instance_group_name": "g", "instance_type": "ml.p4d.24xlarge",
                                           "instance_count": 2}])),
    "subnets": st.one_of(st.none(), st.lists(st.text(max_size=4), max_size=2)),
    "inputs_like_typo": values,
}
FRAMEWORKS = st.sampled_from(["pytorch", "pytorch", "pytorch", "tensorflow", "huggingface", "mxnet", "framework",
                              "pytroch"])


@st.composite
def estimator_args(draw: st.DrawFn, code_dir: str) -> tuple[str, Any]:
    args: dict[str, Any] = {"entry_point": "train.py", "source_dir": code_dir, "instance_type": "ml.p4d.24xlarge",
                            "instance_count": 2, "framework_version": "2.3", "py_version": "py311",
                            "distribution": draw(mutated(draw(st.sampled_from(SEED_DISTRIBUTIONS))))}
    for key in draw(st.lists(st.sampled_from(sorted(ARG_VALUES)), max_size=4, unique=True)):
        value = draw(ARG_VALUES[key])
        args[key] = code_dir if value == "SRC" else value
    if draw(st.integers(0, 20)) == 0:
        return draw(FRAMEWORKS), draw(values)  # not even a mapping
    return draw(FRAMEWORKS), args


def _check(framework: str, args: Any, base_dir: Path) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec = validate_args(framework, args, base_dir=str(base_dir))
    except ValidationError as exc:
        assert exc.errors, "a ValidationError must carry at least one problem"
        for error in exc.errors:
            assert isinstance(error.path, str) and error.path, error
            assert error.message and "Input should be" not in error.message, error
            assert str(error).startswith(error.path)
        return
    resolved = resolve(spec, framework)
    assert resolved.processes_per_host >= 1 and resolved.instance_count >= 1
    plan = build_plan(resolved, {})
    assert (plan.world_size == resolved.instance_count * resolved.processes_per_host
            or resolved.strategy not in MULTI_PROCESS)


@settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
def test_only_validation_errors_escape(data: st.DataObject, code_dir: Path) -> None:
    framework, args = data.draw(estimator_args(str(code_dir)))
    _check(framework, args, code_dir)
