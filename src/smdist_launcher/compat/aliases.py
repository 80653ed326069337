"""A meta-path finder: SageMaker's module names (and their submodules) ARE our modules, not copies."""
from __future__ import annotations

import importlib
import importlib.machinery
import sys
import types

from . import ALIASES


def target_of(fullname: str) -> tuple[str, str, str] | None:
    """(our module, owner, user-facing alias) for a user-facing name or a submodule of one."""
    for alias, (target, owner) in ALIASES.items():
        if fullname == alias or fullname.startswith(alias + "."):
            return target + fullname[len(alias):], owner, alias
    return None


# Plain classes: the import system only needs these methods, and importlib.abc costs ~10 ms at every start-up
# of every user process (this runs from sitecustomize).
class _AliasLoader:
    def __init__(self, target: str, owner: str) -> None:
        self.target = target
        self.owner = owner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return types.ModuleType(spec.name)  # placeholder; exec_module swaps in the real module

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        try:
            real = importlib.import_module(self.target)
        except ImportError as e:
            raise ImportError(f"{name} is provided by {self.target} ({self.owner}), which is not available in this "
                              f"installation of smdist-launcher: {e}", name=name) from e
        if self.target.count(".") <= 2 and not any(not k.startswith("_") for k in vars(real)):
            raise ImportError(f"{name} is provided by {self.target} ({self.owner}), which is not implemented yet "
                              "in this version of smdist-launcher", name=name)
        sys.modules[name] = real  # the import system returns what sys.modules holds after exec_module


class AliasFinder:
    def find_spec(self, fullname: str, path: "list[str] | None" = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        found = target_of(fullname)
        if found is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(found[0], found[1]))  # type: ignore[arg-type]


def install() -> AliasFinder:
    """Idempotent: put the finder first on sys.meta_path."""
    for finder in sys.meta_path:
        if isinstance(finder, AliasFinder) or type(finder).__name__ == "AliasFinder":
            return finder  # type: ignore[return-value]
    finder = AliasFinder()
    sys.meta_path.insert(0, finder)
    return finder
