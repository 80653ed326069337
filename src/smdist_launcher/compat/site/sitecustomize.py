"""Runs at interpreter start-up for user processes of smdist-train (this directory is on their PYTHONPATH).

Installs the import aliases (`torch.sagemaker`, `smdistributed.*`), then runs the sitecustomize we shadow."""
import os as _os
import sys as _sys


def _install_aliases() -> None:
    try:
        from _smdist_path import ensure_importable

        ensure_importable()
        from smdist_launcher.compat.aliases import install
    except ImportError:  # smdist-launcher not importable here: leave the interpreter as it was
        return
    install()


def _chain() -> None:
    """Python imports only the first sitecustomize on sys.path: run the next one too."""
    import importlib.machinery
    import importlib.util

    here = _os.path.dirname(_os.path.realpath(__file__))
    rest = [p for p in _sys.path if _os.path.realpath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


def _rank_cwd() -> None:
    """mpirun starts every rank in its own cwd, i.e. the master's code dir: an MPI rank of smdist-train moves to its
    host's code dir (on SageMaker both are /opt/ml/code, so this changes nothing there)."""
    cwd = _os.environ.get("SMDIST_RANK_CWD")
    if cwd and "OMPI_COMM_WORLD_RANK" in _os.environ and _os.path.isdir(cwd):
        try:
            _os.chdir(cwd)
        except OSError:
            pass


_rank_cwd()
_install_aliases()
_chain()
