"""The runtime layers import with the stdlib only (GPU machines have torch but no pydantic/yaml/rich/boto3)."""
import subprocess
import sys

MODULES = ["smdist_launcher.contract", "smdist_launcher.container.runtime", "smdist_launcher.container.__main__",
           "smdist_launcher.container.rsh_agent", "smdist_launcher.container.parameter_server",
           "smdist_launcher.container.ps_sidecar", "smdist_launcher.compat.aliases"]


def test_runtime_imports_without_sdk_dependencies():
    code = ("import sys\n" + "".join(f"import {m}\n" for m in MODULES) +
            "print(sorted(m for m in ('pydantic', 'yaml', 'rich', 'boto3', 'torch') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
