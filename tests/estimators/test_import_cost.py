"""`from smdist_launcher import PyTorch` defers pydantic, the schemas and the catalogs to the first construction.

The import is what a notebook or a launcher script pays on every start (target: 1/20 of the official SDK's; see
docs/benchmarks.md). No time is asserted here (the machine is shared); what is loaded is.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_DEFERRED = ("pydantic", "yaml", "difflib", "importlib.resources", "smdist_launcher.jobspec.estimator_args",
             "smdist_launcher.jobspec.resolved", "smdist_launcher.jobspec.image_catalog", "smdist_launcher.plan.model")

_PROBE = f"""
import json, sys
from smdist_launcher import PyTorch
from smdist_launcher.jobspec import catalog
after_import = sorted(m for m in {_DEFERRED!r} if m in sys.modules)
catalog_read = catalog._rows.cache_info().currsize > 0
job = PyTorch(**json.loads(sys.argv[1]))
print(json.dumps([after_import, catalog_read, job.plan().world_size, 'pydantic' in sys.modules]))
"""


def test_import_defers_schemas_and_catalogs_to_the_first_construction(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    args = dict(entry_point="train.py", source_dir=str(tmp_path), instance_type="ml.p4d.24xlarge", instance_count=2,
                framework_version="2.3", py_version="py311", distribution={"torch_distributed": {"enabled": True}})
    out = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(args)], capture_output=True, text=True, check=True)
    after_import, catalog_read, world_size, pydantic_loaded = json.loads(out.stdout)
    assert after_import == [] and not catalog_read
    assert world_size == 16 and pydantic_loaded  # construction still validates and resolves with the schemas
