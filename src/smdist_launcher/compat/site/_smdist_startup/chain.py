"""Python imports only the first ``sitecustomize`` on sys.path: ours runs the next one too."""
import os
import sys


def run_next_sitecustomize(ours: str) -> None:
    """Find and run the ``sitecustomize`` that the one in directory ``ours`` shadows, if there is one."""
    import importlib.machinery
    import importlib.util

    here = os.path.realpath(ours)
    rest = [p for p in sys.path if os.path.realpath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
