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


_stack_file = None


def _stack_dumps_on_signal() -> None:
    """A rank of a job dumps every Python thread's stack when the launcher sends it SIGUSR2 (before it
    stops a hung job: max_run, Ctrl-C), into $SMDIST_STACKS_DIR/<pid>.txt. faulthandler writes from its C signal
    handler, so a rank stuck in a collective or in C code still answers. Only processes that know their rank register:
    torchrun's agent and other helpers are left alone."""
    global _stack_file
    folder = _os.environ.get("SMDIST_STACKS_DIR")
    rank = (_os.environ.get("RANK") or _os.environ.get("OMPI_COMM_WORLD_RANK") or _os.environ.get("SMDIST_RANK"))
    if not folder or rank is None:
        return
    try:
        import faulthandler
        import json
        import signal

        _os.makedirs(folder, exist_ok=True)
        final = _os.path.join(folder, f"{_os.getpid()}.txt")
        out = open(final + ".tmp", "w")  # noqa: SIM115 - kept open for the life of the process
        out.write(json.dumps({"pid": _os.getpid(), "rank": int(rank), "host": _os.environ.get("SMDIST_HOST")}) + "\n")
        out.flush()
        faulthandler.register(signal.SIGUSR2, file=out, all_threads=True, chain=False)
        _os.replace(final + ".tmp", final)  # visible only once the handler is in place: the signal never kills it
        _stack_file = out
    except Exception:  # noqa: BLE001 - a diagnostic aid must never stop the user's script
        return


_rank_cwd()
_stack_dumps_on_signal()
_install_aliases()
_chain()
