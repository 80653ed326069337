"""Make smdist_launcher importable from this site dir even where it is not installed (a source checkout on
PYTHONPATH of the runtime but not of the user's process)."""
import importlib.util
import os
import sys


def ensure_importable() -> None:
    if importlib.util.find_spec("smdist_launcher") is None:  # looked up, not imported: the user's process pays nothing
        # <root>/smdist_launcher/compat/site/_smdist_path.py -> <root>
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        if root not in sys.path:
            sys.path.append(root)
