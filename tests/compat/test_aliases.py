"""SageMaker import paths resolve to our modules in a fresh interpreter that has the compat site dir on PYTHONPATH."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types

import pytest

from smdist_launcher.compat import ALIASES, SITE_DIR, aliases


def _python(code: str, tmp_path, extra_path: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(p for p in (str(SITE_DIR), extra_path) if p)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": path, **env})


def test_torch_sagemaker_is_our_smp(tmp_path):
    r = _python("import torch.sagemaker as tsm, smdist_launcher.smp as smp, torch; "
                "assert tsm is smp and torch.sagemaker is smp; print('ok')", tmp_path)
    assert r.stdout.strip() == "ok", r.stderr


def test_smddp_import_path_is_our_smddp(tmp_path):
    r = _python("import smdistributed.dataparallel.torch.torch_smddp as m, smdist_launcher.smddp as s; "
                "assert m is s; print('ok')", tmp_path)
    assert r.stdout.strip() == "ok", r.stderr


def test_smp_v1_path_resolves_or_says_what_is_missing(tmp_path):
    r = _python("import smdistributed.modelparallel.torch as smp, smdist_launcher.smp.v1 as v1; "
                "assert smp is v1; print('ok')", tmp_path)
    if r.returncode:
        assert "cannot import smdistributed.modelparallel.torch (the SMP v1 API)" in r.stderr, r.stderr
        assert "smdist-launcher provides it as smdist_launcher.smp.v1" in r.stderr, r.stderr
    else:
        assert r.stdout.strip() == "ok"


def test_alias_mechanics_with_missing_and_empty_targets(monkeypatch):
    empty = types.ModuleType("smdist_fake_empty")
    monkeypatch.setitem(sys.modules, "smdist_fake_empty", empty)
    full = types.ModuleType("smdist_fake_full")
    full.thing = 1  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "smdist_fake_full", full)
    monkeypatch.setitem(ALIASES, "fake_sm.full", ("smdist_fake_full", "test"))
    monkeypatch.setitem(ALIASES, "fake_sm.empty", ("smdist_fake_empty", "test"))
    monkeypatch.setitem(ALIASES, "fake_sm.missing", ("smdist_fake_not_there", "owner X"))
    finder = aliases.install()
    assert aliases.install() is finder  # idempotent
    try:
        import importlib

        monkeypatch.setitem(sys.modules, "fake_sm", types.ModuleType("fake_sm"))
        sys.modules["fake_sm"].__path__ = []  # type: ignore[attr-defined]
        assert importlib.import_module("fake_sm.full") is full
        with pytest.raises(ImportError, match=r"cannot import fake_sm.empty \(test\): this version of "
                           "smdist-launcher does not implement it yet. Upgrade smdist-launcher") as empty_error:
            importlib.import_module("fake_sm.empty")
        with pytest.raises(ImportError, match=r"cannot import fake_sm.missing \(owner X\): smdist-launcher provides "
                           r"it as smdist_fake_not_there, which failed to import \(.*\). Install the package that "
                           "provides the module 'smdist_fake_not_there'") as missing_error:
            importlib.import_module("fake_sm.missing")
        for error in (empty_error.value, missing_error.value):
            assert not re.search(r"\bissue \d", str(error))  # no internal tracker numbers in what users read
        assert aliases.target_of("fake_sm.full.sub") == ("smdist_fake_full.sub", "test", "fake_sm.full")
    finally:
        for name in ("fake_sm.full", "fake_sm.empty", "fake_sm.missing"):
            sys.modules.pop(name, None)
        sys.meta_path.remove(finder)


@pytest.mark.parametrize(("error", "advice"), [
    (ModuleNotFoundError("No module named 'yaml'", name="yaml"),
     "Install the package that provides the module 'yaml' in this Python environment"),
    (ImportError("cannot import name 'x' from 'torch.distributed'", name="torch.distributed"),
     "Install a version of 'torch' that smdist-launcher supports in this Python environment"),
    (ModuleNotFoundError("No module named 'smdist_launcher.smp.v1'", name="smdist_launcher.smp.v1"),
     "This installation of smdist-launcher is incomplete: reinstall or upgrade it in this Python environment"),
    (ImportError("something else"),
     "Check that smdist-launcher and its dependencies are installed in this Python environment"),
])
def test_import_errors_say_what_to_install(error: ImportError, advice: str) -> None:
    assert aliases.what_to_install(error) == advice


def test_user_facing_descriptions_have_no_internal_issue_numbers() -> None:
    for alias, (_, what) in ALIASES.items():
        assert not re.search(r"\bissue\b", what, re.IGNORECASE), (alias, what)


def test_other_sitecustomize_still_runs(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['OTHER_SITECUSTOMIZE'] = 'ran'\n")
    r = _python("import os, sys; import torch.sagemaker; print(os.environ.get('OTHER_SITECUSTOMIZE'))", tmp_path,
                str(other))
    assert r.stdout.strip() == "ran", r.stderr


def test_mpi_rank_moves_to_its_host_code_dir(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    r = _python("import os; print(os.getcwd())", tmp_path, SMDIST_RANK_CWD=str(code), OMPI_COMM_WORLD_RANK="3")
    assert r.stdout.strip() == str(code)
    r = _python("import os; print(os.getcwd())", tmp_path, SMDIST_RANK_CWD=str(code))  # not an MPI rank
    assert r.stdout.strip() == str(tmp_path)


def test_a_rank_registers_its_stack_dumps(tmp_path, monkeypatch):
    for name in ("RANK", "OMPI_COMM_WORLD_RANK", "SMDIST_RANK"):
        monkeypatch.delenv(name, raising=False)
    stacks = tmp_path / "stacks"
    r = _python("import json, os; print(os.getpid())", tmp_path, SMDIST_STACKS_DIR=str(stacks), RANK="2",
                SMDIST_HOST="algo-1")
    pid = int(r.stdout.strip())
    header = (stacks / f"{pid}.txt").read_text().splitlines()[0]
    assert json.loads(header) == {"pid": pid, "rank": 2, "host": "algo-1"}
    r = _python("import os; print(os.getpid())", tmp_path, SMDIST_STACKS_DIR=str(stacks / "helper"))  # no rank
    assert not (stacks / "helper").exists(), r.stderr
