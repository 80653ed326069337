"""Our v3 config classes (jobspec/v3_configs.py) and how v3's objects are read by shape (jobspec/v3_objects.py)."""
from __future__ import annotations

import enum
from typing import Any

import pytest

from smdist_launcher.errors import ValidationError
from smdist_launcher.jobspec.v3_configs import MPI, SMP, Compute, InstanceGroup, SourceCode, Torchrun
from smdist_launcher.jobspec.v3_objects import distributed_kind, plain, training_mode


class _Attributes:
    """A stand-in with public attributes only, like a plain class a user (or another SDK) might write."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


class _Dumps:
    """A stand-in for v3's pydantic configs: every field in model_dump(), unset ones as None."""

    FIELDS: tuple[str, ...] = ()

    def __init__(self, **fields: Any) -> None:
        self._fields = {name: fields.get(name) for name in self.FIELDS}

    def model_dump(self) -> dict[str, Any]:
        return {k: (v.model_dump() if isinstance(v, _Dumps) else v) for k, v in self._fields.items()}


def _named(name: str, base: type, fields: tuple[str, ...] = ()) -> type:
    return type(name, (base,), {"FIELDS": fields})


class _Mode(enum.Enum):
    LOCAL_CONTAINER = "LOCAL_CONTAINER"


def test_our_classes_take_v3_arguments() -> None:
    code = SourceCode(source_dir="src", entry_script="train.py", requirements="requirements.txt")
    assert code.model_dump(exclude_none=True) == {"source_dir": "src", "entry_script": "train.py",
                                                  "requirements": "requirements.txt"}
    dist = Torchrun(process_count_per_node=2, smp=SMP(tensor_parallel_degree=2, hybrid_shard_degree=1))
    assert dist.smp is not None and dist.smp.tensor_parallel_degree == 2
    groups = Compute(instance_groups=[InstanceGroup(instance_group_name="a", instance_type="local", instance_count=1)])
    assert groups.instance_groups is not None and groups.instance_groups[0].instance_count == 1
    assert MPI(mpi_additional_options=["-x", "A"]).type == "mpi"


def test_our_classes_refuse_unknown_and_mistyped_fields_with_key_paths_all_at_once() -> None:
    with pytest.raises(ValidationError) as info:
        SourceCode(entry_scrpt="train.py", source_dir=3)
    paths = {e.path: e.message for e in info.value.errors}
    assert "did you mean 'entry_script'" in paths["SourceCode.entry_scrpt"]
    assert paths["SourceCode.source_dir"].startswith("must be a string")
    with pytest.raises(ValidationError) as info:
        SMP(tensor_parallel_degree="2")
    assert [e.path for e in info.value.errors] == ["SMP.tensor_parallel_degree"]


def test_nested_validation_reports_the_nested_path_not_a_wrapped_error() -> None:
    # pydantic calls a model's own __init__ for nested data unless told otherwise; the error must stay pydantic's
    from pydantic import ValidationError as PydanticValidationError

    with pytest.raises(PydanticValidationError) as info:
        Torchrun.model_validate({"smp": {"tensor_parallel_degre": 2}})
    assert info.value.errors()[0]["loc"] == ("smp", "tensor_parallel_degre")


def test_plain_reads_attributes_model_dump_and_mappings_dropping_none() -> None:
    smp = _named("SMP", _Dumps, ("tensor_parallel_degree", "random_seed"))(tensor_parallel_degree=2)
    torchrun = _named("Torchrun", _Dumps, ("process_count_per_node", "smp"))(smp=smp)
    assert plain(torchrun) == {"smp": {"tensor_parallel_degree": 2}, "type": "torchrun"}
    code = _Attributes(source_dir="src", entry_script="train.py", command=None, _private=1)
    assert plain(code) == {"source_dir": "src", "entry_script": "train.py"}
    assert plain({"a": None, "b": [_Attributes(x=1)]}) == {"b": [{"x": 1}]}
    assert plain(_Mode.LOCAL_CONTAINER) == "LOCAL_CONTAINER"
    assert training_mode(_Mode.LOCAL_CONTAINER) == "LOCAL_CONTAINER"


def test_our_own_objects_read_like_v3_ones() -> None:
    assert plain(Torchrun(process_count_per_node=2)) == {"type": "torchrun", "process_count_per_node": 2}
    assert plain(MPI(mpi_additional_options=["-x", "A"])) == {"type": "mpi", "mpi_additional_options": ["-x", "A"]}


def test_torchrun_and_mpi_are_told_apart_by_class_name_type_key_or_a_field_only_one_has() -> None:
    assert distributed_kind(_named("Torchrun", _Attributes)()) == "torchrun"
    assert distributed_kind(_named("MPI", _Attributes)(process_count_per_node=2)) == "mpi"
    assert distributed_kind({"type": "mpi"}) == "mpi"
    assert distributed_kind({"smp": {"random_seed": 1}}) == "torchrun"
    assert distributed_kind(_Attributes(mpi_additional_options=["-x", "A"])) == "mpi"
    assert distributed_kind({"process_count_per_node": 2}) is None  # ambiguous: reported by the caller


def test_sagemaker_core_unassigned_fields_are_unset() -> None:
    """sagemaker-core's shapes (StoppingCondition, ...) mark fields not given with `Unassigned()`, not None; their
    model_dump() turns it into {}, so pydantic models are read by attribute."""
    from pydantic import BaseModel, ConfigDict

    unassigned = type("Unassigned", (), {})

    class StoppingCondition(BaseModel):
        model_config = ConfigDict(arbitrary_types_allowed=True)
        max_runtime_in_seconds: Any = None
        max_wait_time_in_seconds: Any = None

    shape = StoppingCondition(max_runtime_in_seconds=60, max_wait_time_in_seconds=unassigned())
    assert plain(shape) == {"max_runtime_in_seconds": 60}
    assert plain({"a": unassigned(), "b": 1}) == {"b": 1}
