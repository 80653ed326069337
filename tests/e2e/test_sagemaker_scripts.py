"""The SageMaker-script corpus: every folder of tests/e2e/sagemaker_scripts/ is one script written the way a
SageMaker user writes it (AWS import paths, SM_* / argparse hyperparameters, absolute /opt/ml paths), with its
job.yaml and an optional check.py. Each job file runs as `smdist run` runs it (estimator from the job file,
local backend), must complete, and then check.py's `check(job)` asserts on the finished job.

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/e2e/test_sagemaker_scripts.py -k <case>

check.py may also define `REQUIRES = ["module", ...]`: Python modules the script imports that are optional here
(the case is skipped, naming them, when one is missing). See /work/coord/CORPUS.md for the convention."""
from __future__ import annotations

import importlib.util
import json
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from smdist_launcher.backends.local import run_job
from smdist_launcher.backends.toolkit.process_sweep import job_processes
from smdist_launcher.errors import JobFailedError

CORPUS = Path(__file__).resolve().parent / "sagemaker_scripts"
REAL_OPT_ML = Path("/opt/ml")
# Distributions whose plan starts mpirun (the case needs OpenMPI).
MPI_KEYS = ("mpi", "smdistributed", "pytorchddp")

pytestmark = pytest.mark.slow


@dataclass
class CorpusJob:
    """What check.py gets: the finished local job."""

    dir: Path                      # the job folder (<jobs>/<job name>)
    hosts: list[str]               # algo-1, algo-2, ...
    record: dict[str, Any]         # job.json
    console: str                   # everything the job printed (all hosts, prefixed [algo-N rK])
    _logs: dict[str, str] = field(default_factory=dict)

    @property
    def model_tar(self) -> Path:
        return self.dir / "output" / "model.tar.gz"

    @property
    def output_tar(self) -> Path:
        return self.dir / "output" / "output.tar.gz"

    def host_dir(self, host: str) -> Path:
        """That host's /opt/ml tree (kept after the job)."""
        return self.dir / "hosts" / host / "opt" / "ml"

    def logs(self, host: str) -> str:
        if host not in self._logs:
            self._logs[host] = (self.dir / "logs" / f"{host}.log").read_text(errors="replace")
        return self._logs[host]

    def tar_names(self, which: str = "model") -> list[str]:
        with tarfile.open(self.model_tar if which == "model" else self.output_tar) as tar:
            return tar.getnames()

    def tar_text(self, name: str, which: str = "model") -> str:
        with tarfile.open(self.model_tar if which == "model" else self.output_tar) as tar:
            member = tar.extractfile(name)
            assert member is not None, f"{name} is not a regular file in the {which} archive"
            return member.read().decode()


def _cases() -> list[Any]:
    params = []
    for folder in sorted(p for p in CORPUS.iterdir() if (p / "job.yaml").is_file()) if CORPUS.is_dir() else []:
        marks = [pytest.mark.mpi] if _uses_mpi(folder / "job.yaml") else []
        if _job_file(folder / "job.yaml").get("instance_type") == "local_gpu":
            marks.append(pytest.mark.gpu)  # skipped without GPUs: only `gpu` tests may skip in CI (skip_policy.py)
        params.append(pytest.param(folder, id=folder.name, marks=marks))
    return params


def _job_file(path: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(path.read_text()) or {}


def _uses_mpi(job_yaml: Path) -> bool:
    distribution = _job_file(job_yaml).get("distribution") or {}
    if "mpi" in distribution and len(distribution) > 1:  # mpi only carries processes_per_host beside another one
        distribution = {k: v for k, v in distribution.items() if k != "mpi"}
    return any(key in distribution for key in MPI_KEYS)


def _load_check(folder: Path) -> ModuleType | None:
    path = folder / "check.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(f"corpus_check_{folder.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _skip_unless_runnable(folder: Path, check: ModuleType | None) -> None:
    if _uses_mpi(folder / "job.yaml") and shutil.which("mpirun") is None:
        pytest.skip("needs OpenMPI's mpirun (scripts/bootstrap.sh installs it)")
    missing = [m for m in getattr(check, "REQUIRES", []) if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs Python module(s) {', '.join(missing)} (scripts/bootstrap.sh installs the test extra)")
    if _job_file(folder / "job.yaml").get("instance_type") == "local_gpu":
        import torch

        if not torch.cuda.is_available():
            pytest.skip("local_gpu case: needs CUDA GPUs")


def _opt_ml_state() -> list[str] | None:
    """The machine's real /opt/ml, as a listing: no case may write into it."""
    if not REAL_OPT_ML.exists():
        return None
    return sorted(str(p.relative_to(REAL_OPT_ML)) for p in REAL_OPT_ML.rglob("*"))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("folder", _cases())
def test_sagemaker_script(folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          capsys: pytest.CaptureFixture[str]) -> None:
    from smdist_launcher.estimators import estimator_from_job_file

    check = _load_check(folder)
    _skip_unless_runnable(folder, check)
    outside = tmp_path / "cwd"
    outside.mkdir()
    monkeypatch.chdir(outside)  # relative paths in the job file resolve against its folder, never the cwd
    jobs = tmp_path / "jobs"
    opt_ml_before = _opt_ml_state()

    estimator = estimator_from_job_file(str(folder / "job.yaml"))
    plan = estimator.plan(job_name=folder.name.replace("_", "-"))
    error: JobFailedError | None = None
    try:
        run_job(estimator.submission(plan), jobs_root=jobs)
    except JobFailedError as exc:
        error = exc
    console = capsys.readouterr().out
    print(console)  # shown by pytest when an assertion below fails

    job_dir = jobs / plan.job_name
    record = json.loads((job_dir / "job.json").read_text())
    assert error is None, f"{folder.name}: {error}"
    assert record["status"] == "Completed", record.get("failure_reason")
    assert job_processes(record["job_id"]) == [], "a process of the job survived"
    assert list(outside.iterdir()) == [], "the job wrote into the working directory"
    assert _opt_ml_state() == opt_ml_before, "the job wrote into this machine's real /opt/ml"
    if check is not None and hasattr(check, "check"):
        check.check(CorpusJob(dir=job_dir, hosts=list(plan.host_names), record=record, console=console))


@pytest.mark.mpi
@pytest.mark.timeout(600)
def test_without_host_isolation_mpi_still_works_and_the_fallback_is_said_once(tmp_path, monkeypatch, capsys):
    """SMDIST_HOST_ISOLATION=off stands in for a machine that refuses namespaces: Open MPI's per-host folders alone
    keep the hosts' shared-memory files apart, and the console explains once what is not isolated."""
    pytest.importorskip("mpi4py")
    if shutil.which("mpirun") is None:
        pytest.skip("needs OpenMPI's mpirun")
    from smdist_launcher.estimators import estimator_from_job_file

    monkeypatch.setenv("SMDIST_HOST_ISOLATION", "off")
    monkeypatch.chdir(tmp_path)
    estimator = estimator_from_job_file(str(CORPUS / "mpi4py_collectives" / "job.yaml"))
    plan = estimator.plan(job_name="mpi4py-no-isolation")
    run_job(estimator.submission(plan), jobs_root=tmp_path / "jobs")
    out = capsys.readouterr().out
    assert out.count("absolute /opt/ml paths are NOT private") == 1, out
    assert "turned off by SMDIST_HOST_ISOLATION=off" in out
    assert "rank 3/4 on algo-2: Bcast, Allreduce, Gather and 8 MiB messages ok" in out
    seen = json.loads((tmp_path / "jobs" / plan.job_name / "hosts" / "algo-2" / "opt" / "ml" / "model" /
                       "mpi-rank-2.json").read_text())
    assert seen["hostname"] != "algo-2"  # really without the UTS namespace
