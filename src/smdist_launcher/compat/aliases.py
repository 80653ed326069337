"""A meta-path finder: SageMaker's module names (and their submodules) ARE our modules, not copies."""
from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types
from collections.abc import Sequence

from . import ALIASES


def target_of(fullname: str) -> tuple[str, str, str] | None:
    """(our module, what it is, user-facing alias) for a user-facing name or a submodule of one."""
    for alias, (target, what) in ALIASES.items():
        if fullname == alias or fullname.startswith(alias + "."):
            return target + fullname[len(alias):], what, alias
    return None


# Plain classes: the import system only needs these methods, and importlib.abc costs ~10 ms at every start-up
# of every user process (this runs from sitecustomize).
class _AliasLoader:
    def __init__(self, target: str, what: str) -> None:
        self.target = target
        self.what = what

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return types.ModuleType(spec.name)  # placeholder; exec_module swaps in the real module

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        try:
            real = importlib.import_module(self.target)
        except ImportError as e:
            raise ImportError(f"cannot import {name} ({self.what}): smdist-launcher provides it as {self.target}, "
                              f"which failed to import ({e}). {what_to_install(e)}", name=name) from e
        if self.target.count(".") <= 2 and not any(not k.startswith("_") for k in vars(real)):
            raise ImportError(f"cannot import {name} ({self.what}): this version of smdist-launcher does not "
                              "implement it yet. Upgrade smdist-launcher, or remove this import from the script",
                              name=name)
        sys.modules[name] = real  # the import system returns what sys.modules holds after exec_module


def what_to_install(error: ImportError) -> str:
    """The advice for a target that failed to import: which package to install in this Python environment."""
    missing = (error.name or "").split(".")[0]
    if not missing:
        return "Check that smdist-launcher and its dependencies are installed in this Python environment"
    if missing == "smdist_launcher":
        return "This installation of smdist-launcher is incomplete: reinstall or upgrade it in this Python environment"
    if isinstance(error, ModuleNotFoundError):
        return f"Install the package that provides the module '{missing}' in this Python environment"
    return f"Install a version of '{missing}' that smdist-launcher supports in this Python environment"


class AliasFinder:
    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        found = target_of(fullname)
        if found is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(found[0], found[1]))  # type: ignore[arg-type]


def install() -> AliasFinder:
    """Idempotent: put the finder first on sys.meta_path."""
    for existing in sys.meta_path:
        if isinstance(existing, AliasFinder) or type(existing).__name__ == "AliasFinder":
            return existing  # type: ignore[return-value]
    finder = AliasFinder()
    sys.meta_path.insert(0, finder)
    return finder
