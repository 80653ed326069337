"""SageMaker's import path, served by smdist-launcher (see smdist_launcher.compat)."""
from _smdist_path import ensure_importable as _ensure_importable

_ensure_importable()
from smdist_launcher.compat.aliases import install as _install  # noqa: E402

_install()  # also without sitecustomize (python -S, another sitecustomize first)

from smdist_launcher.compat import SMP_V1_VERSION as __version__  # noqa: E402,F401
