"""container/host_isolation.py: the pure parts, and isolate_host itself in a child process (it changes the
namespaces of the process that calls it)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from smdist_launcher.container.host_isolation import (
    HOST_LOCAL_MCA,
    ISOLATION_ENV,
    HostIsolation,
    hosts_file_text,
    localize_orted_argv,
    needed,
    scratch_env,
    turned_off,
)

REAL_OPT_ML = Path("/opt/ml")


def test_hosts_file_keeps_the_machine_lines_and_names_every_host():
    text = hosts_file_text({"algo-2": "127.9.0.3", "algo-1": "127.9.0.2"}, "127.0.0.1 localhost\n")
    assert text == ("127.0.0.1 localhost\n127.9.0.2\talgo-1\n127.9.0.3\talgo-2\n"
                    "::ffff:127.9.0.2\talgo-1\n::ffff:127.9.0.3\talgo-2\n")


def test_worker_hosts_name_their_own_open_mpi_folders_and_the_master_only_its_tmpdir():
    worker = scratch_env("/tmp/s/algo-2-x")
    assert worker["TMPDIR"] == "/tmp/s/algo-2-x"
    assert all(worker[f"OMPI_MCA_{name}"] == "/tmp/s/algo-2-x" for name in HOST_LOCAL_MCA)
    # mpirun would forward the master's OMPI_MCA_* to every rank of every host, over the workers' own values.
    assert scratch_env("/tmp/s/algo-1-x", mpi_master=True) == {"TMPDIR": "/tmp/s/algo-1-x"}


def test_orted_gets_this_hosts_folders_instead_of_the_masters():
    argv = ["orted", "-mca", "ess", "env", "-mca", "btl_vader_backing_directory", "/tmp/master",
            "-mca", "orte_tmpdir_base", "/tmp/master", "-mca", "btl", "^openib"]
    env = {"OMPI_MCA_btl_vader_backing_directory": "/tmp/w", "OMPI_MCA_orte_tmpdir_base": "/tmp/w"}
    assert localize_orted_argv(argv, env) == [
        "orted", "-mca", "ess", "env", "-mca", "btl_vader_backing_directory", "/tmp/w",
        "-mca", "orte_tmpdir_base", "/tmp/w", "-mca", "btl", "^openib"]
    assert localize_orted_argv(argv, {}) == argv  # a host without its own folder changes nothing


def test_isolation_is_for_local_hosts_with_a_sandbox_root(tmp_path):
    two = {"algo-1": "a", "algo-2": "b"}
    assert needed(tmp_path, two)
    # one local host too: its absolute /opt/ml writes (model, checkpoints) went to the machine's /opt/ml, lost to
    # the job and shared with every other one-host job
    assert needed(tmp_path, {"algo-1": "a"})
    assert not needed(tmp_path, {})  # not local mode (Slurm, a real host): the machine is the host
    assert not needed("/opt/ml", two)  # a real container: its /opt/ml is already its own
    assert turned_off({ISOLATION_ENV: "off"}) and not turned_off({})


def test_user_processes_see_the_hosts_tree_at_opt_ml_only_where_it_is_mounted_there():
    root = "/jobs/j/hosts/algo-1/opt/ml"
    assert HostIsolation(opt_ml=True, hostname=True).seen_root(root) == REAL_OPT_ML
    assert HostIsolation(reason="not running as root").seen_root(root) == Path(root)
    assert HostIsolation(hostname=True, reason="mount refused").seen_root(root) == Path(root)


def test_fallback_note_says_what_is_shared_and_what_still_works():
    note = HostIsolation(reason="not running as root").fallback_note("/jobs/j/hosts/algo-1/opt/ml")
    assert "NOT private" in note and "not running as root" in note
    assert "SAGEMAKER_BASE_DIR" in note and "/jobs/j/hosts/algo-1/opt/ml" in note


CHILD = r"""
import json, os, socket, sys
from smdist_launcher.container.host_isolation import isolate_host
if len(sys.argv) > 3:
    os.setuid(int(sys.argv[3]))
result = isolate_host("algo-7", sys.argv[1], addresses={"algo-7": "127.77.0.2", "algo-8": "127.77.0.3"},
                      scratch=sys.argv[2])
seen = {"result": result.__dict__, "hostname": socket.gethostname()}
if result.opt_ml:
    seen["marker"] = open("/opt/ml/marker").read()
    open("/opt/ml/written-inside", "w").write("x")
    seen["algo-8"] = socket.gethostbyname("algo-8")
print(json.dumps(seen))
"""


def _child(tmp_path: Path, *extra: str) -> dict:
    root, scratch = tmp_path / "root", tmp_path / "scratch"
    root.mkdir(exist_ok=True)
    scratch.mkdir(exist_ok=True)
    (root / "marker").write_text("this host's tree")
    os.chmod(tmp_path, 0o755)
    out = subprocess.run([sys.executable, "-c", CHILD, str(root), str(scratch), *extra], capture_output=True,
                         text=True, timeout=120, env={**os.environ, ISOLATION_ENV: "auto"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _opt_ml_listing() -> list[str] | None:
    return sorted(map(str, REAL_OPT_ML.rglob("*"))) if REAL_OPT_ML.exists() else None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount and UTS namespaces)")
def test_root_gets_its_own_opt_ml_hostname_and_hosts_file_without_touching_the_machine(tmp_path):
    before, hostname = _opt_ml_listing(), socket.gethostname()
    seen = _child(tmp_path)
    if not seen["result"]["opt_ml"] and "refused" in seen["result"]["reason"]:
        pytest.skip(f"this machine refuses namespaces to root: {seen['result']['reason']}")
    assert seen["result"] == {"opt_ml": True, "hostname": True, "hosts_file": True, "reason": ""}
    assert seen["marker"] == "this host's tree" and seen["hostname"] == "algo-7" and seen["algo-8"] == "127.77.0.3"
    assert (tmp_path / "root" / "written-inside").read_text() == "x"  # /opt/ml/... landed in the host's tree
    assert _opt_ml_listing() == before and socket.gethostname() == hostname  # the machine is as it was
    assert list((tmp_path / "scratch").iterdir()) == []  # the overlay's tmpfs and the hosts file left no trace


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user")
def test_without_root_nothing_changes_and_the_reason_is_given(tmp_path):
    seen = _child(tmp_path, "65534")
    assert seen["result"] == {"opt_ml": False, "hostname": False, "hosts_file": False,
                              "reason": "not running as root"}
    assert seen["hostname"] == socket.gethostname()
