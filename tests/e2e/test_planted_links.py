"""A job run as another user (serve --run-as) plants links in its own folder; root, which scrubs its secrets, saves
its checkpoints and packs its outputs afterwards, writes nothing outside and reads nothing outside (issue 28).

One light job: two hosts running a plain Python script (no torch), as user nobody."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from run_as import python_for_everyone, tree_snapshot
from smdist_launcher import PyTorch

pytestmark = pytest.mark.slow

MARKER = b"ROOT-ONLY-sentinel-7f3a"

# Runs as nobody at the end of each host's script. algo-1: input/config and checkpoints/ become links to root's
# folders. algo-2: hyperparameters.json holds a secret-named value (so root rewrites it) with a temp-file link for
# every pid of the launcher's ancestry, the old fixed temp name. Both: links to root's files among model/ outputs.
PLANT = r'''
import json, os
ml = os.path.dirname(os.environ["SM_MODEL_DIR"])
sent = os.environ["SENTINEL_DIR"]
host = os.environ["SM_CURRENT_HOST"]
config, ckpt = os.path.join(ml, "input", "config"), os.environ["SMDIST_CHECKPOINT_DIR"]
os.makedirs(ckpt, exist_ok=True)
open(os.path.join(ckpt, f"state-{host}.pt"), "w").write("weights")
os.symlink(os.path.join(sent, "private", "id_rsa"), os.path.join(ckpt, "key"))
os.symlink(os.path.join(sent, "private", "id_rsa"), os.path.join(os.environ["SM_MODEL_DIR"], "leak.txt"))
os.symlink(os.path.join(sent, "private"), os.path.join(os.environ["SM_MODEL_DIR"], "leak-dir"))
open(os.path.join(os.environ["SM_MODEL_DIR"], f"model-{host}.txt"), "w").write("ok")
if host == "algo-1":
    os.rename(config, config + "-moved")
    os.symlink(os.path.join(sent, "config"), config)
    os.rename(ckpt, ckpt + "-moved")
    os.symlink(os.path.join(sent, "private"), ckpt)
else:
    pids, pid = [], os.getppid()
    while pid > 1:
        pids.append(pid)
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    for pid in pids + list(range(2, 4096)):
        try:
            os.symlink(os.path.join(sent, "shadow"), os.path.join(config, f".hyperparameters.json.{pid}.tmp"))
        except FileExistsError:
            pass
    with open(os.path.join(config, "hyperparameters.json"), "w") as f:
        json.dump({"api_token": '"left-by-the-job"'}, f)
print("planted", flush=True)
'''


def _files_holding(folder: Path, needle: bytes) -> list[str]:
    """Regular files below `folder` (links not followed) whose bytes, or gzip-unpacked bytes, hold `needle`."""
    import gzip

    hits = []
    for dirpath, _, filenames in os.walk(folder):
        for name in filenames:
            path = Path(dirpath, name)
            if path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            if data[:2] == b"\x1f\x8b":
                data += gzip.decompress(data)
            if needle in data:
                hits.append(str(path))
    return hits


LAUNCH = """
import sys
from smdist_launcher.backends.local import run_job
from smdist_launcher.plan.model import LaunchPlan
run_job(LaunchPlan.from_json(open(sys.argv[1]).read()), jobs_root=sys.argv[2], logs=False, run_as="nobody")
"""


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """A folder user nobody may enter (pytest's tmp_path under /tmp/pytest-of-root is root's alone)."""
    if os.geteuid() != 0:
        pytest.skip("needs root (run-as)")
    folder = Path(tempfile.mkdtemp(prefix="smdist-planted-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_root_follows_no_link_a_run_as_job_planted(shared_folder: Path) -> None:
    sent = shared_folder / "sentinel"
    (sent / "config").mkdir(parents=True)
    (sent / "private").mkdir(mode=0o700)
    (sent / "config" / "hyperparameters.json").write_text(json.dumps({"db_password": '"' + MARKER.decode() + '"'}))
    (sent / "private" / "id_rsa").write_bytes(MARKER + b" private key\n")
    (sent / "private" / "id_rsa").chmod(0o600)
    (sent / "shadow").write_bytes(MARKER + b" shadow\n")
    before = tree_snapshot(sent)
    src, store, jobs = shared_folder / "src", shared_folder / "ckpt-store", shared_folder / "jobs"
    src.mkdir()
    (src / "train.py").write_text(PLANT)
    est = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=2,
                  framework_version="2.3", py_version="py311", environment={"SENTINEL_DIR": str(sent)},
                  checkpoint_s3_uri=store.as_uri())
    plan_file = shared_folder / "plan.json"
    plan_file.write_text(est.plan(job_name="planted-links").to_json())
    python, environ = python_for_everyone()
    # The launcher runs as root in its own process: its interpreter is the one the hosts run as nobody.
    done = subprocess.run([python, "-c", LAUNCH, str(plan_file), str(jobs)], env={**os.environ, **environ},
                          capture_output=True, text=True, timeout=300, cwd=shared_folder)
    assert done.returncode == 0, done.stderr[-3000:]
    logs = "".join((jobs / "planted-links" / "logs" / f"algo-{i}.log").read_text() for i in (1, 2))
    assert logs.count("] planted\n") == 2, logs
    # nothing outside was written (content, mode, owner), created or removed
    assert tree_snapshot(sent) == before
    # nothing outside was read into what root delivers: checkpoints, archives, records, logs
    assert _files_holding(store, MARKER) == [] and _files_holding(jobs, MARKER) == []
    assert sorted(p.name for p in store.rglob("*")) == ["state-algo-2.pt"]
