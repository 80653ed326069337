"""SageMaker's import paths (`smdistributed.*`, `torch.sagemaker`) for user scripts run by the runtime.

SITE_DIR goes on PYTHONPATH of user processes: it holds a `smdistributed` package of aliases and a
`sitecustomize` that makes `torch.sagemaker` resolve to `smdist_launcher.smp`."""
from __future__ import annotations

from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent / "site"

# The SMP v1 API level smdist_launcher.smp.v1 follows (the last v1 release line): smdistributed.modelparallel.__version__
SMP_V1_VERSION = "1.15.0"

# user-facing module -> our implementation (owner in the project).
ALIASES: dict[str, tuple[str, str]] = {
    "smdistributed.dataparallel.torch.torch_smddp": ("smdist_launcher.smddp", "smddp (issue 4)"),
    "smdistributed.dataparallel.torch.distributed": ("smdist_launcher.smddp.distributed", "smddp (issue 4)"),
    "smdistributed.dataparallel.torch.parallel": ("smdist_launcher.smddp.parallel", "smddp legacy API (issue 8)"),
    "smdistributed.modelparallel.torch": ("smdist_launcher.smp.v1", "smp v1 (issue 5)"),
    "torch.sagemaker": ("smdist_launcher.smp", "smp v2 (issue 5)"),
}
