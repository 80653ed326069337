"""SageMaker's import paths (`smdistributed.*`, `torch.sagemaker`) for user scripts run by the runtime.

SITE_DIR goes on PYTHONPATH of user processes: it holds a `smdistributed` package of aliases and a
`sitecustomize` that makes `torch.sagemaker` resolve to `smdist_launcher.smp`."""
from __future__ import annotations

from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent / "site"

# The SMP v1 API level smdist_launcher.smp.v1 follows (the last v1 release line):
# smdistributed.modelparallel.__version__
SMP_V1_VERSION = "1.15.0"

# user-facing module -> (our implementation, what it is: named in the ImportError when it cannot be served).
ALIASES: dict[str, tuple[str, str]] = {
    "smdistributed.dataparallel.torch.torch_smddp": ("smdist_launcher.smddp", "SMDDP's torch_smddp backend"),
    "smdistributed.dataparallel.torch.distributed": ("smdist_launcher.smddp.distributed", "SMDDP's distributed API"),
    "smdistributed.dataparallel.torch.parallel": ("smdist_launcher.smddp.parallel",
                                                  "SMDDP's legacy DistributedDataParallel API"),
    "smdistributed.modelparallel.torch": ("smdist_launcher.smp.v1", "the SMP v1 API"),
    "torch.sagemaker": ("smdist_launcher.smp", "the SMP v2 API"),
}
