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
            absent = not_provided(name, self.target, self.what, e)
            if absent is not None:
                raise ImportError(f"cannot import {name}: {absent}", name=name) from None
            raise ImportError(f"cannot import {name} ({self.what}): smdist-launcher provides it as {self.target}, "
                              f"which failed to import ({e}). {what_to_install(e)}", name=name) from e
        if self.target.count(".") <= 2 and not any(not k.startswith("_") for k in vars(real)):
            raise ImportError(f"cannot import {name} ({self.what}): this version of smdist-launcher does not "
                              "implement it yet. Upgrade smdist-launcher, or remove this import from the script",
                              name=name)
        sys.modules[name] = real  # the import system returns what sys.modules holds after exec_module


def not_provided(name: str, target: str, what: str, error: ImportError) -> str | None:
    """The message for a user-facing module our tree simply does not have (None: some other import failure).

    That is the case when the module found missing is the target itself or one of its parents (the script asked
    for torch.sagemaker.x.y and smdist_launcher/smp/x/y.py is not there), unless this installation's file list
    names it (then files are missing from the installation, and reinstalling is the advice).
    """
    missing = getattr(error, "name", None) or ""
    if not isinstance(error, ModuleNotFoundError) or not (target == missing or target.startswith(missing + ".")):
        return None
    roots = {our for our, _ in ALIASES.values()}
    if missing.count(".") < 1 or missing in roots or _listed_in_installation(missing):
        return None  # a package every alias needs, or a file the installation lists: the installation is broken
    # the user-facing name of the missing module, and what its parent package does provide
    extra = target.count(".") - missing.count(".")
    user_missing = name.rsplit(".", extra)[0] if extra else name
    user_parent, our_parent = user_missing.rpartition(".")[0], missing.rpartition(".")[0]
    offered = _submodules(our_parent)
    listing = (f"its modules under {user_parent} are: {', '.join(offered)}" if offered
               else f"it has no modules under {user_parent}")
    return (f"{user_missing} is not provided by smdist-launcher's compatibility layer for {what}, which implements "
            f"part of it ({listing}; docs/compat.md lists each name's status). Remove this import from the script, "
            "or guard it with try/except ImportError")


def _submodules(package: str) -> list[str]:
    import pkgutil

    try:
        paths = getattr(importlib.import_module(package), "__path__", None)
    except ImportError:
        return []
    return sorted(m.name for m in pkgutil.iter_modules(paths or []) if not m.name.startswith("_"))


def _listed_in_installation(module: str) -> bool:
    """True when the installed distribution's file list (RECORD) names ``module``'s file: it should be there."""
    from importlib import metadata

    try:
        files = metadata.files("smdist-launcher") or []
    except metadata.PackageNotFoundError:
        return False
    stem = module.replace(".", "/")
    wanted = {f"{stem}.py", f"{stem}/__init__.py"}
    return any(str(f).replace("\\", "/") in wanted for f in files)


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
