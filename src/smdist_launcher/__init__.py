"""smdist-launcher: launch distributed PyTorch training the way Amazon SageMaker does.

Everything here is imported lazily: `import smdist_launcher` must stay cheap and must not
pull in torch, boto3 or pydantic-heavy modules; the runtime subpackages (`smddp`, `smp`,
`container`) must import on machines without the SDK's dependencies.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "__version__": "smdist_launcher.package_info",
    "PyTorch": "smdist_launcher.estimators",
    "TensorFlow": "smdist_launcher.estimators",
    "HuggingFace": "smdist_launcher.estimators",
    "MXNet": "smdist_launcher.estimators",
    "ModelTrainer": "smdist_launcher.estimators",
    "Framework": "smdist_launcher.estimators",
    "estimator_from_job_file": "smdist_launcher.estimators",
    "LaunchPlan": "smdist_launcher.plan.model",
    "ValidationError": "smdist_launcher.errors",
    "ValidationWarning": "smdist_launcher.errors",
    "ErrorItem": "smdist_launcher.errors",
    "JobFailedError": "smdist_launcher.errors",
}

__all__ = sorted(name for name in _EXPORTS if not name.startswith("_"))

if TYPE_CHECKING:  # pragma: no cover
    # `X as X`: an explicit re-export (what __getattr__ returns at run time), for type checkers and linters
    from .errors import (
        ErrorItem as ErrorItem,
        JobFailedError as JobFailedError,
        ValidationError as ValidationError,
        ValidationWarning as ValidationWarning,
    )
    from .estimators import (
        Framework as Framework,
        HuggingFace as HuggingFace,
        ModelTrainer as ModelTrainer,
        MXNet as MXNet,
        PyTorch as PyTorch,
        TensorFlow as TensorFlow,
        estimator_from_job_file as estimator_from_job_file,
    )
    from .package_info import __version__ as __version__
    from .plan.model import LaunchPlan as LaunchPlan


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'smdist_launcher' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
