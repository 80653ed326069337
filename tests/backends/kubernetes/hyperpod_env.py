"""SageMaker HyperPod's own model of a HyperPodPyTorchJob, from the `sagemaker-hyperpod` SDK in a virtual environment
of its own (it hard-pins click, pytest, requests, hydra-core...: it must not enter .venv), exported as JSON schema
for validate.py to check rendered objects with jsonschema in the project's environment.

Built once with pip from the pinned list next to this file (--no-deps: the model needs only pydantic), cached by
content key (`$SMDIST_TEST_CACHE`, else ~/.cache/smdist-tests) like the SDK v3 venv (tests/serve/sdk_v3_env.py); a
file lock makes a second session wait for a build in progress; a half-built venv (no `.ready` marker) is rebuilt.
The model's module is loaded by file path, so the SDK's package __init__ (and its pinned dependencies) never run."""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REQUIREMENTS = Path(__file__).with_name("hyperpod_requirements.txt")
CACHE = Path(os.environ.get("SMDIST_TEST_CACHE") or Path.home() / ".cache" / "smdist-tests")
MODEL_FILE = "sagemaker/hyperpod/training/config/hyperpod_pytorch_job_unified_config.py"
PIP_TIMEOUT_S = 10 * 60
_READY = ".ready"
# Run in the SDK's venv: the model's JSON schema with the wire (camelCase) names. The top model ignores unknown
# keys; the API server's structural schema does not keep them, so they are refused here as in every nested model.
_EXPORT = """
import glob, importlib.util, json, sys
path = glob.glob(sys.prefix + "/lib/python3*/site-packages/" + sys.argv[1])[0]
spec = importlib.util.spec_from_file_location("hyperpod_unified_config", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
schema = module._HyperPodPytorchJob.model_json_schema(by_alias=False)
schema["additionalProperties"] = False
print(json.dumps(schema, sort_keys=True))
"""


def venv_dir() -> Path:
    key = hashlib.sha256(repr((REQUIREMENTS.read_text(), _EXPORT, sys.version_info[:2])).encode()).hexdigest()[:16]
    return CACHE / f"hyperpod-{key}"


def schema_file() -> Path:
    return venv_dir() / "hyperpodpytorchjob.schema.json"


def schema() -> dict[str, Any]:
    """The JSON schema of HyperPodPyTorchJob's spec, as the SDK's model defines it (built when the cache lacks it)."""
    if not (venv_dir() / _READY).is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        with open(CACHE / f"{venv_dir().name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)   # bounded: the build below is
            if not (venv_dir() / _READY).is_file():
                _build(venv_dir())
    return dict(json.loads(schema_file().read_text()))


def _build(target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)   # a build that died half-way
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True, capture_output=True, timeout=300)
    python = str(target / "bin" / "python")
    # --no-compile: the export compiles what it imports, once (a CI machine builds this while the suite runs)
    done = subprocess.run([python, "-m", "pip", "install", "-q", "--no-compile", "--disable-pip-version-check",
                           "--no-input", "--no-deps", "-r", str(REQUIREMENTS)], capture_output=True, text=True,
                          timeout=PIP_TIMEOUT_S)
    if done.returncode != 0:
        tail = "\n".join(line for line in done.stderr.splitlines() if not line.startswith("WARNING"))[-3000:]
        raise RuntimeError(f"pip install sagemaker-hyperpod failed ({done.returncode}): {tail}")
    out = subprocess.run([python, "-c", _EXPORT, MODEL_FILE], capture_output=True, text=True, check=True, timeout=120)
    (target / "hyperpodpytorchjob.schema.json").write_text(out.stdout)
    (target / _READY).write_text(f"{time.time()}\n")
