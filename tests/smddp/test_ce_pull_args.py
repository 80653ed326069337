"""The native copy-engine helper's argument checks (native/smddp/ce_pull.cpp), built with the host compiler.

Checked before any driver call, so they run without a GPU: the functions return SMDDP_ERR_ARGS (-3)
for a part outside the chunk, however the size_t sum start + len wraps."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from smdist_launcher.smddp import native

ERR_ARGS = -3
MAX = (1 << 64) - 1

# Each call in its own interpreter: an unchecked part reaches the (unresolved, null) driver entry points
# and the process dies with SIGSEGV instead of returning.
CALL = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
vp, sz, i, u64 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint64
lib.smddp_ce_stage_part.argtypes = [vp, vp, vp, vp, u64, u64, u64, sz, sz, sz, i, i]
lib.smddp_ce_pull_part.argtypes = [vp, vp, vp, vp, u64, vp, sz, sz, sz, i, i, i, i]
nbytes, start, length = (int(x) for x in sys.argv[3:6])
if sys.argv[2] == "stage":
    rc = lib.smddp_ce_stage_part(None, None, None, None, 0, 0, 0, nbytes, start, length, 0, 0)
else:
    rc = lib.smddp_ce_pull_part(None, None, None, None, 0, None, nbytes, start, length, 0, 2, 1, 0)
print(rc)
"""


@pytest.fixture(scope="module")
def helper_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        pytest.skip("no C++ compiler")
    src = native.native_source(native.SOURCE_NAME)
    assert src is not None
    lib = tmp_path_factory.mktemp("ce") / "libsmddp_ce.so"
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", str(src), "-o", str(lib), "-ldl"], check=True)
    return lib


@pytest.mark.parametrize("fn", ["stage", "pull"])
@pytest.mark.parametrize(("nbytes", "start", "length"), [
    (4, MAX, 2),  # start + len wraps to 1 <= nbytes
    (4, 2, MAX),  # likewise
    (1 << 20, 1 << 63, 1 << 63),  # wraps to 0
    (4, 5, 0),  # an empty part past the end
    (4, 2, 3),  # plain overrun
])
def test_a_part_outside_the_chunk_is_refused_before_any_copy(helper_lib: Path, fn: str, nbytes: int, start: int,
                                                             length: int) -> None:
    run = subprocess.run([sys.executable, "-c", CALL, str(helper_lib), fn, str(nbytes), str(start), str(length)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"the helper crashed (rc {run.returncode}): {run.stderr[-500:]}"
    assert int(run.stdout) == ERR_ARGS
