"""How a job's outputs are delivered, carried in its job folder (outputs-settings.json) from the submission to
whoever packs them at the end: the launcher, a later `smdist` command finishing a killed launcher's job, or a Slurm
allocation's last node. SageMaker's `disable_output_compression` (v2) / `OutputDataConfig.CompressionType: NONE` (v3)
deliver the model and output folders as folders instead of model.tar.gz / output.tar.gz."""
from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SETTINGS_FILE = "outputs-settings.json"


class Compression(str, enum.Enum):
    GZIP = "GZIP"
    NONE = "NONE"


@dataclass(frozen=True)
class OutputSettings:
    compression: Compression = Compression.GZIP

    @classmethod
    def of(cls, settings: Any) -> OutputSettings:
        """From a submission's validated arguments (None for a bare plan: SageMaker's default, GZIP)."""
        off = bool(getattr(settings, "disable_output_compression", None))
        return cls(Compression.NONE if off else Compression.GZIP)

    def save(self, job_root: Path) -> None:
        (job_root / SETTINGS_FILE).write_text(json.dumps({"compression": self.compression.value}) + "\n")

    @classmethod
    def load(cls, job_root: Path) -> OutputSettings:
        try:
            data = json.loads((job_root / SETTINGS_FILE).read_text())
            return cls(Compression(data.get("compression") or Compression.GZIP))
        except (OSError, ValueError):
            return cls()
