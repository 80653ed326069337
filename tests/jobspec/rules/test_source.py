from __future__ import annotations

from pathlib import Path
from typing import Any

from ..conftest import messages, problems


def test_entry_point_required(args: dict[str, Any]) -> None:
    del args["entry_point"]
    assert problems("pytorch", args) == ["entry_point"]


def test_entry_point_missing_in_source_dir(args: dict[str, Any], code_dir: Path) -> None:
    errs = messages("pytorch", {**args, "entry_point": "trian.py"})
    assert errs == {"entry_point": f'no file named "trian.py" was found in directory "{code_dir}"'}


def test_source_dir_missing(args: dict[str, Any], tmp_path: Path) -> None:
    assert problems("pytorch", {**args, "source_dir": str(tmp_path / "nope")}) == ["source_dir"]


def test_entry_point_must_stay_inside_source_dir(args: dict[str, Any]) -> None:
    assert problems("pytorch", {**args, "entry_point": "../train.py"}) == ["entry_point"]
    assert problems("pytorch", {**args, "entry_point": "/etc/passwd"}) == ["entry_point"]


def test_without_source_dir_relative_to_base_dir(args: dict[str, Any], code_dir: Path) -> None:
    del args["source_dir"]
    assert problems("pytorch", args, base_dir=str(code_dir)) == []
    assert problems("pytorch", args, base_dir=str(code_dir.parent)) == ["entry_point"]


def test_s3_source_dir_is_not_checked(args: dict[str, Any]) -> None:
    assert problems("pytorch", {**args, "source_dir": "s3://bucket/code/sourcedir.tar.gz", "entry_point": "x.py"}) == []


def test_check_source_can_be_disabled(args: dict[str, Any]) -> None:
    assert problems("pytorch", {**args, "entry_point": "elsewhere.py"}, check_source=False) == []


def test_multi_process_launchers_need_python(args: dict[str, Any]) -> None:
    args["entry_point"] = "run.sh"
    assert problems("pytorch", args) == []   # single process: a shell script is fine
    args["distribution"] = {"torch_distributed": {"enabled": True}}
    assert problems("pytorch", args) == ["entry_point"]


MPI_DISTRIBUTIONS = {
    "mpi": {"mpi": {"enabled": True}},
    "pytorchddp": {"pytorchddp": {"enabled": True}},
    "smddp": {"smdistributed": {"dataparallel": {"enabled": True}}},
    "smp_v1": {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"partitions": 2}}},
               "mpi": {"enabled": True, "processes_per_host": 8}},
}


def test_mpirun_launchers_run_a_shell_entry_point_as_the_toolkit_does(args: dict[str, Any]) -> None:
    """The toolkit's MPI and SMDataParallel runners start any entry point (`/bin/sh -c "./run.sh ..."`)."""
    args["entry_point"] = "run.sh"
    for name, distribution in MPI_DISTRIBUTIONS.items():
        assert problems("pytorch", {**args, "distribution": distribution}) == [], name


def test_torchrun_launchers_keep_refusing_other_entry_points(args: dict[str, Any]) -> None:
    """torchrun runs Python programs only (the toolkit: "Unsupported entry point type")."""
    args["entry_point"] = "run.sh"
    smp_v2 = {"smdistributed": {"modelparallel": {"enabled": True, "parameters": {"hybrid_shard_degree": 2}}},
              "torch_distributed": {"enabled": True}}
    for strategy, distribution in (("torch_distributed", {"torch_distributed": {"enabled": True}}),
                                   ("smp_v2", smp_v2)):
        errs = messages("pytorch", {**args, "distribution": distribution})
        assert errs == {"entry_point": f"{strategy} runs Python scripts only (*.py)"}, strategy
