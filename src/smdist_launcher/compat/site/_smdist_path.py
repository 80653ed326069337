"""Make smdist_launcher importable from this site dir even where it is not installed (a source checkout on
PYTHONPATH of the runtime but not of the user's process)."""
import os
import sys


def ensure_importable() -> None:
    try:
        import smdist_launcher  # noqa: F401
    except ImportError:
        # <root>/smdist_launcher/compat/site/_smdist_path.py -> <root>
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        if root not in sys.path:
            sys.path.append(root)
