"""The runtime package imports on the GPU image: no pydantic/yaml/rich/boto3, no compiler, no CUDA."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

BLOCKER = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('pydantic', 'yaml', 'rich', 'boto3'):
            raise ImportError('blocked for the test: ' + name)
        return None
sys.meta_path.insert(0, Block())
import torch.distributed as dist
import smdist_launcher.smddp
import smdist_launcher.smddp.smddprun, smdist_launcher.smddp.cuda_path, smdist_launcher.smddp.fast_allgather
import smdist_launcher.smddp.fast_allreduce, smdist_launcher.smddp.native
assert 'SMDDP' in dist.Backend._plugins
import smdist_launcher.smddp  # a second import must not re-register (register_backend would raise)
print('ok')
"""


def test_imports_with_only_stdlib_and_torch() -> None:
    out = subprocess.run([sys.executable, "-c", BLOCKER], capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_sdk_import_does_not_pull_in_torch() -> None:
    code = "import sys, smdist_launcher; assert 'torch' not in sys.modules; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": str(SRC)})
    assert out.returncode == 0, out.stderr


def test_register_is_idempotent() -> None:
    import torch.distributed as dist

    from smdist_launcher.smddp import register

    register()
    register()
    assert "SMDDP" in dist.Backend._plugins
