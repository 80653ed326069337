"""What a fresh clone needs for the kubernetes backend and these tests: every third-party module they import comes
from a distribution pyproject lists (the `k8s` extra, or the base / torch / test extras), and scripts/bootstrap.sh
installs the `k8s` extra. (The HyperPod schema venv is hyperpod_env.py's, from hyperpod_requirements.txt.)"""
from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")   # Python 3.11+ (CI's); 3.10 has no TOML reader in the stdlib

ROOT = Path(__file__).resolve().parents[3]
SOURCES = [ROOT / "src/smdist_launcher/backends/kubernetes", Path(__file__).parent]


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _imports() -> set[str]:
    found = set()
    for folder in SOURCES:
        for path in folder.glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    found.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "smdist_launcher"}


def test_every_imported_package_is_listed() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    listed = {_name(r) for r in [*project["dependencies"], *extras["k8s"], *extras["torch"], *extras["test"]]}
    dists = packages_distributions()
    missing = {m: dists.get(m) for m in _imports()
               if not {d.lower().replace("_", "-") for d in dists.get(m, [])} & listed}
    # a module of a listed package's own dependency (referencing: jsonschema's) is allowed when that one is listed
    assert set(missing) <= {"referencing"}, missing
    assert {"kubernetes", "kubeflow-trainer-api", "kubernetes-validate", "jsonschema"} <= {
        _name(r) for r in extras["k8s"]}


def test_bootstrap_installs_the_k8s_extra() -> None:
    line = re.search(r'^PIP_EXTRAS="([^"]*)"', (ROOT / "scripts/bootstrap.sh").read_text(), re.M)
    assert line is not None and "k8s" in line.group(1).split(",")
