"""Job files of random content (mappings and raw bytes): only ValidationError escapes, always with paths."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from smdist_launcher.errors import ValidationError
from smdist_launcher.jobspec import load_job_file, parse_job_file

from .fuzz_strategies import SEED_DISTRIBUTIONS, mutated, values

BASE = {"framework": "pytorch", "entry_point": "train.py", "source_dir": ".", "instance_type": "local",
        "instance_count": 2,
        "framework_version": "2.3", "py_version": "py311", "inputs": {"training": "data"}, "job_name": "j-1"}
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


def _only_validation_errors(call: Any) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call()
    except ValidationError as exc:
        assert exc.errors and all(e.path and e.message for e in exc.errors)


@SETTINGS
@given(data=st.data())
def test_random_job_mappings(data: st.DataObject, code_dir: Path) -> None:
    job = data.draw(mutated({**BASE, "distribution": data.draw(st.sampled_from(SEED_DISTRIBUTIONS))}))
    if data.draw(st.booleans()):
        job[data.draw(st.sampled_from(["framework", "inputs", "job_name", "sagemaker_session"]))] = data.draw(values)
    _only_validation_errors(lambda: parse_job_file(job, path="job.yaml", base_dir=str(code_dir)))


@SETTINGS
@given(content=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode),
                         st.sampled_from([b"framework: [", b"a: 1\na: 2\n", b"!!python/object:os.system {}",
                                          b"\xff\xfe",
                                          b"&a [*a]", b"framework: pytorch\nentry_point: {x: !!binary aGk=}\n"])))
def test_random_job_file_bytes(content: bytes, tmp_path_factory: Any) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "job.yaml"
    path.write_bytes(content)
    _only_validation_errors(lambda: load_job_file(path))
