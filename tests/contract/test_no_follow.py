"""contract/no_follow.py: work in a folder a job owns never follows a link the job planted there (issue 28).

Every case plants links into a tree standing for a job's folder, pointing at a sentinel tree outside it, and checks
that the sentinel tree is unchanged byte for byte and that nothing of it was read."""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from run_as import tree_snapshot
from smdist_launcher.contract.no_follow import (
    chown_tree,
    copy_into,
    copy_out,
    host_anchor,
    open_nofollow,
    read_host_file,
    read_json_nofollow,
    regular_files,
    split_host_path,
    write_json_nofollow,
)

SECRET = b"root-only secret bytes\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """The sentinel tree: what a job must never get root to write or read."""
    folder = tmp_path / "outside"
    (folder / "ml" / "code").mkdir(parents=True)
    (folder / "shadow").write_bytes(SECRET)
    (folder / "hyperparameters.json").write_text('{"api_token": "\\"s3cret\\""}')
    (folder / "ml" / "code" / "keep.py").write_bytes(SECRET)
    return folder


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A trusted root (hosts/algo-1) with a job-owned tree below it."""
    root = tmp_path / "hosts" / "algo-1"
    (root / "opt" / "ml" / "input" / "config").mkdir(parents=True)
    return root


def test_a_link_in_place_of_a_folder_is_never_followed(job: Path, outside: Path) -> None:
    before = tree_snapshot(outside)
    config = job / "opt" / "ml" / "input" / "config"
    config.rmdir()
    config.symlink_to(outside)
    with pytest.raises(NotADirectoryError):
        write_json_nofollow(job, "opt/ml/input/config/hyperparameters.json", {"x": 1})
    with pytest.raises(NotADirectoryError):
        read_json_nofollow(job, "opt/ml/input/config/hyperparameters.json")
    with pytest.raises(NotADirectoryError):
        open_nofollow(job, "opt/ml/input/config/new.txt", os.O_WRONLY | os.O_CREAT)
    assert tree_snapshot(outside) == before


def test_a_link_at_the_file_is_replaced_on_write_and_refused_on_read(job: Path, outside: Path) -> None:
    before = tree_snapshot(outside)
    target = job / "opt" / "ml" / "input" / "config" / "hyperparameters.json"
    target.symlink_to(outside / "hyperparameters.json")
    with pytest.raises(OSError) as raised:
        read_json_nofollow(job, "opt/ml/input/config/hyperparameters.json")
    assert raised.value.errno == errno.ELOOP
    write_json_nofollow(job, "opt/ml/input/config/hyperparameters.json", {"api_token": "***REDACTED***"})
    assert not target.is_symlink() and target.read_text() == '{"api_token": "***REDACTED***"}'
    assert tree_snapshot(outside) == before


def test_a_fifo_is_refused_without_waiting_for_a_writer(job: Path) -> None:
    os.mkfifo(job / "opt" / "ml" / "input" / "config" / "hyperparameters.json")
    with pytest.raises(OSError) as raised:
        read_json_nofollow(job, "opt/ml/input/config/hyperparameters.json")
    assert raised.value.errno == errno.EINVAL


def test_a_missing_file_gives_the_default_and_names_must_stay_below_the_root(job: Path) -> None:
    assert read_json_nofollow(job, "opt/ml/input/config/nothing.json", default={}) == {}
    for bad in ("../outside/shadow", "/etc/shadow", "opt/../../outside"):
        with pytest.raises(ValueError):
            read_json_nofollow(job, bad)


def test_writes_are_atomic_and_leave_no_temp_file(job: Path) -> None:
    write_json_nofollow(job, "opt/ml/new/dir/file.json", {"b": 1, "a": 2}, mode=0o600)
    folder = job / "opt" / "ml" / "new" / "dir"
    assert os.listdir(folder) == ["file.json"]
    assert (folder / "file.json").read_text() == '{"a": 2, "b": 1}'
    assert stat.S_IMODE((folder / "file.json").stat().st_mode) & 0o077 == 0


def test_copy_out_skips_links_and_specials_and_never_dereferences(tmp_path: Path, job: Path, outside: Path) -> None:
    src = job / "opt" / "ml" / "checkpoints"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "state.pt").write_bytes(b"weights")
    (src / "file-link").symlink_to(outside / "shadow")
    (src / "dir-link").symlink_to(outside)
    os.mkfifo(src / "fifo")
    dest = tmp_path / "dest"
    assert copy_out(job, "opt/ml/checkpoints", dest) == 1
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")) == ["sub", "sub/state.pt"]
    kept = tmp_path / "kept"
    assert copy_out(job, "opt/ml/checkpoints", kept, keep_links=True) == 1
    assert os.readlink(kept / "file-link") == str(outside / "shadow")
    assert (kept / "dir-link").is_symlink() and not (kept / "fifo").exists()
    # the folder itself a link: nothing is copied from where it points
    src.rename(job / "opt" / "ml" / "old")
    src.symlink_to(outside)
    assert copy_out(job, "opt/ml/checkpoints", tmp_path / "dest2") == 0
    assert list(regular_files(job, "opt/ml/checkpoints")) == []


def test_copy_into_writes_through_no_planted_link(tmp_path: Path, job: Path, outside: Path) -> None:
    before = tree_snapshot(outside)
    ours = tmp_path / "ours"
    (ours / "a").mkdir(parents=True)
    (ours / "a" / "x.bin").write_bytes(b"restored")
    (ours / "shadow").write_bytes(b"overwritten?")
    dest = job / "opt" / "ml" / "checkpoints"
    dest.mkdir()
    (dest / "shadow").symlink_to(outside / "shadow")  # a file link: replaced, not written through
    (dest / "a").symlink_to(outside / "ml")           # a folder link: refused
    with pytest.raises(NotADirectoryError):
        copy_into(ours, job, "opt/ml/checkpoints")
    (dest / "a").unlink()
    assert copy_into(ours, job, "opt/ml/checkpoints") == 2
    assert (dest / "shadow").read_bytes() == b"overwritten?" and not (dest / "shadow").is_symlink()
    assert tree_snapshot(outside) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_chown_tree_changes_links_not_their_targets(job: Path, outside: Path) -> None:
    before = tree_snapshot(outside)
    ml = job / "opt" / "ml"
    (ml / "code").mkdir()
    (ml / "code" / "train.py").write_text("print(1)")
    (ml / "shadow-link").symlink_to(outside / "shadow")
    (ml / "dir-link").symlink_to(outside / "ml")
    os.link(outside / "shadow", ml / "hard-link")  # root-owned, two links: left alone
    chown_tree(job, 65534, 65534)
    assert (ml / "code" / "train.py").stat().st_uid == 65534 and ml.stat().st_uid == 65534
    assert (ml / "shadow-link").lstat().st_uid == 65534 and (ml / "dir-link").lstat().st_uid == 65534
    assert (ml / "hard-link").stat().st_uid == 0
    assert tree_snapshot(outside) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_tree_reads_skip_hard_links_the_job_does_not_own(tmp_path: Path, job: Path, outside: Path) -> None:
    """Without fs.protected_hardlinks a job can hard-link /etc/shadow into its output: packing the tree with more
    privilege (regular_files, copy_out) must not hand it over. The job's own hard links are kept."""
    out = job / "opt" / "ml" / "output"
    out.mkdir(parents=True, exist_ok=True)
    chown_tree(job, 65534, 65534)
    (out / "model.bin").write_bytes(b"weights")
    os.chown(out / "model.bin", 65534, 65534)            # written by the job
    os.link(out / "model.bin", out / "model-again.bin")  # the job's own file, two links: kept
    os.link(outside / "shadow", out / "shadow")          # root's file, planted as a hard link: skipped
    assert (out / "shadow").stat().st_uid == 0 and (out / "model.bin").stat().st_uid == 65534
    assert sorted(rel for rel, _f, _st in regular_files(job, "opt/ml/output")) == ["model-again.bin", "model.bin"]
    assert copy_out(job, "opt/ml/output", tmp_path / "copied") == 2
    assert sorted(p.name for p in (tmp_path / "copied").iterdir()) == ["model-again.bin", "model.bin"]


def test_host_paths_are_anchored_above_opt_ml(tmp_path: Path, outside: Path) -> None:
    host = tmp_path / "job" / "hosts" / "algo-1"
    assert host_anchor(host / "opt" / "ml") == (host, Path("opt/ml"))
    failure = host / "opt" / "ml" / "output" / "failure.json"
    assert split_host_path(failure) == (host, Path("opt/ml/output/failure.json"))
    (host / "opt" / "ml" / "output").mkdir(parents=True)
    (host / "opt" / "ml" / "output" / "failure.json").symlink_to(outside / "hyperparameters.json")
    with pytest.raises(OSError):
        read_host_file(host / "opt" / "ml" / "output" / "failure.json")
    (host / "opt" / "ml" / "output").rename(host / "opt" / "ml" / "real")
    (host / "opt" / "ml" / "output").symlink_to(outside)
    with pytest.raises(NotADirectoryError):
        read_host_file(host / "opt" / "ml" / "output" / "hyperparameters.json")


def test_remove_at_removes_a_tree_without_entering_its_links(job: Path, outside: Path) -> None:
    from smdist_launcher.contract.no_follow import open_dir_nofollow, remove_at

    before = tree_snapshot(outside)
    code = job / "opt" / "ml" / "code"
    (code / "sub").mkdir(parents=True)
    (code / "sub" / "x.py").write_text("x")
    (code / "sub" / "out").symlink_to(outside / "ml")
    (code / "shadow").symlink_to(outside / "shadow")
    parent = open_dir_nofollow(job, "opt/ml")
    try:
        remove_at(parent, "code")
        remove_at(parent, "missing")
    finally:
        os.close(parent)
    assert not code.exists() and tree_snapshot(outside) == before


# Run with a 2 GiB address-space limit, on 8 GiB sparse files the job filled (a job may fill any file it owns up to
# its disk): root's readers of the job's files read none of them whole (they would fail with MemoryError).
HUGE_READERS = r'''
import json, resource, sys
from pathlib import Path
from smdist_launcher.backends.local.host_environment import scrub_host_secrets
from smdist_launcher.backends.toolkit.diagnosis import early_exits, read_failures
from smdist_launcher.backends.toolkit.log_mux import tail
from smdist_launcher.contract import MLPaths
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
ml = Path(sys.argv[1])
scrub_host_secrets(MLPaths(ml))
print(json.dumps({"tail": tail(ml / "output" / "algo-1.log", 2),
                  "failures": read_failures({"algo-1": ml / "output" / "failure.json"}),
                  "exits": early_exits({"algo-1": ml / "stacks"}, {0: "algo-1"})}))
'''


def _huge(path: Path, end: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(8 << 30)
        f.seek(0, os.SEEK_END)
        f.write(end)


def test_root_reads_no_huge_file_of_the_job_into_memory(job: Path) -> None:
    import json
    import subprocess
    import sys

    ml = job / "opt" / "ml"
    _huge(ml / "input" / "config" / "hyperparameters.json")
    _huge(ml / "output" / "algo-1.log", b"\nnext to last\nlast line\n")
    _huge(ml / "output" / "failure.json")
    _huge(ml / "stacks" / "123.txt")
    _huge(ml / "stacks" / "123.exit")
    out = subprocess.run([sys.executable, "-c", HUGE_READERS, str(ml)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == {"tail": ["next to last", "last line"], "failures": [], "exits": []}


def test_a_tree_nested_without_end_fails_with_an_oserror(tmp_path: Path, job: Path) -> None:
    """A job may nest folders deeper than any path (created one by one through descriptors): every walk stops with an
    OSError its caller handles, not a RecursionError or a process out of descriptors."""
    import shutil
    import subprocess

    from smdist_launcher.contract.no_follow import MAX_DEPTH, open_dir_nofollow, remove_at

    top = job / "opt" / "ml" / "model"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(1100):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
    finally:
        os.close(fd)
    try:
        walks = [lambda: list(regular_files(job, "opt/ml/model")),
                 lambda: copy_out(job, "opt/ml/model", tmp_path / "out")]
        if os.geteuid() == 0:
            walks.append(lambda: chown_tree(job, 65534, 65534))
        for walk in walks:
            with pytest.raises(OSError, match=f"more than {MAX_DEPTH} folders deep"):
                walk()
        parent = open_dir_nofollow(job, "opt/ml")
        try:
            with pytest.raises(OSError, match=f"more than {MAX_DEPTH} folders deep"):
                remove_at(parent, "model")
        finally:
            os.close(parent)
    finally:
        subprocess.run(["rm", "-rf", str(top)], check=True)  # no depth limit; shutil.rmtree recurses
        shutil.rmtree(tmp_path / "out", ignore_errors=True)



def _opened_while(path: Path, action) -> bool:  # type: ignore[no-untyped-def]
    """Whether `path` was opened (inotify IN_OPEN; an O_PATH descriptor is no open) while `action` ran."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    watch = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    assert watch >= 0 and libc.inotify_add_watch(watch, os.fsencode(path), 0x20) >= 0  # IN_OPEN
    try:
        action()
        try:
            return bool(os.read(watch, 4096))
        except BlockingIOError:
            return False
    finally:
        os.close(watch)


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_a_device_node_is_refused_without_being_opened(tmp_path: Path, job: Path) -> None:
    """A job running as root in its container (docker grants CAP_MKNOD) leaves device nodes where root reads or
    copies its files: opening one at all can arm a watchdog, rewind a tape, or make a terminal the controlling one
    of a daemon without one (serve under systemd). Refused by what it is, never opened."""
    ml = job / "opt" / "ml"
    node = ml / "output" / "failure.json"
    node.parent.mkdir(parents=True)
    os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers: harmless if opened after all

    def read() -> None:
        with pytest.raises(OSError):
            read_host_file(node)

    assert not _opened_while(node, read)
    assert not _opened_while(node, lambda: list(regular_files(job, "opt/ml")))
    assert not _opened_while(node, lambda: copy_out(job, "opt/ml", tmp_path / "out"))


def test_a_file_name_of_the_longest_length_is_written_and_restored(tmp_path: Path, job: Path) -> None:
    """A checkpoint may have a name of up to 255 bytes (NAME_MAX): restoring it must not fail because the temp file
    beside it needs a longer one (a retry would lose its checkpoints)."""
    saved = tmp_path / "saved"
    saved.mkdir()
    name = "é" * 120 + "-state.pt"  # 249 bytes in UTF-8
    (saved / name).write_bytes(b"weights")
    assert copy_into(saved, job, "opt/ml/checkpoints") == 1
    assert (job / "opt" / "ml" / "checkpoints" / name).read_bytes() == b"weights"
    write_json_nofollow(job, Path("opt/ml/output", "x" * 255), {"a": 1})
    assert read_json_nofollow(job, Path("opt/ml/output", "x" * 255)) == {"a": 1}
    assert sorted(os.listdir(job / "opt" / "ml" / "output")) == ["x" * 255]


def test_a_bounded_read_holds_the_file_not_the_bound(tmp_path: Path) -> None:
    """read_host_file bounds what a job's file may make us hold (16 MiB). Reading a failure.json of a few hundred bytes
    allocated the whole bound each time (read(limit + 1)): every report and describe paid 16 MiB per host file. The
    bound still holds: one byte over it is refused."""
    import tracemalloc

    from smdist_launcher.contract.no_follow import read_bytes_nofollow

    (tmp_path / "failure.json").write_bytes(b"x" * 300)
    (tmp_path / "big").write_bytes(b"y" * 100_001)
    tracemalloc.start()
    try:
        assert read_host_file(tmp_path / "failure.json") == b"x" * 300
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak
    assert read_bytes_nofollow(tmp_path, "big", limit=100_001) == b"y" * 100_001
    with pytest.raises(OSError) as raised:
        read_bytes_nofollow(tmp_path, "big", limit=100_000)
    assert raised.value.errno == errno.EFBIG


def test_a_bounded_read_of_a_big_file_holds_it_once(tmp_path: Path) -> None:
    """Reading in 64 KiB pieces and joining them held a file under the bound twice at the join (pieces and the
    whole): a 12 MiB failure.json or stack dump read with the 16 MiB bound peaked at 24 MiB, where read(limit + 1)
    had held 16 MiB. One read of the size fstat gives (plus one byte, to see growth) holds it once; the bound and a
    file growing while read still behave."""
    import tracemalloc

    from smdist_launcher.contract.no_follow import HOST_FILE_LIMIT, read_bytes_nofollow

    size = 12 << 20
    (tmp_path / "dump").write_bytes(b"d" * size)
    tracemalloc.start()
    try:
        assert len(read_host_file(tmp_path / "dump")) == size
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < size * 1.25, (peak, size)
    for n, limit in ((0, 0), (1, 0), (5, 5), (6, 5), (HOST_FILE_LIMIT, HOST_FILE_LIMIT),
                     (HOST_FILE_LIMIT + 1, HOST_FILE_LIMIT)):
        (tmp_path / "f").write_bytes(b"x" * n)
        if n > limit:
            with pytest.raises(OSError) as raised:
                read_bytes_nofollow(tmp_path, "f", limit=limit)
            assert raised.value.errno == errno.EFBIG
        else:
            assert read_bytes_nofollow(tmp_path, "f", limit=limit) == b"x" * n


def test_a_bounded_read_of_a_file_growing_past_its_size_reads_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    """The size fstat gives is a hint: a file that grew after it (a rank still writing its dump) is read on to the
    bound, and refused past it."""
    import smdist_launcher.contract.no_follow as no_follow

    (tmp_path / "f").write_bytes(b"y" * 200_000)
    real_fstat = os.fstat

    def stale(fd: int) -> os.stat_result:  # the size before the last 199,900 bytes were written
        st = real_fstat(fd)
        return os.stat_result((*st[:6], 100, *st[7:])) if stat.S_ISREG(st.st_mode) else st
    monkeypatch.setattr(no_follow.os, "fstat", stale)
    assert no_follow.read_bytes_nofollow(tmp_path, "f", limit=200_000) == b"y" * 200_000
    with pytest.raises(OSError) as raised:
        no_follow.read_bytes_nofollow(tmp_path, "f", limit=199_999)
    assert raised.value.errno == errno.EFBIG


def test_a_temp_of_a_writer_in_another_pid_namespace_of_the_same_hostname_is_never_stale(tmp_path: Path) -> None:
    """A launcher in a container of this machine's hostname (docker --network host) writes into a file:// store shared
    with us: its pid means nothing in our pid namespace (not alive here while alive there). Its temp file must not be
    swept (before: the name held only the hostname and the pid: stale here, swept under the live writer's copy)."""
    import shutil
    import subprocess
    import sys

    from smdist_launcher.contract.no_follow import sweep_stale_temps
    from smdist_launcher.contract.write_temps import _WRITER, is_stale, temp_name

    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs unshare and root")
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                           "from smdist_launcher.contract.write_temps import temp_name; print(temp_name())"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"no pid namespace here: {done.stderr.strip()}")
    theirs = _WRITER.match(done.stdout.strip())
    assert theirs is not None and theirs["pid"] == "1"
    dead = 1 << 22 | 12345  # above pid_max's default: no process of ours has it; the writer there is alive
    name = f".smdist-{theirs['machine']}-{dead}-{'0' * 16}.tmp"
    assert not is_stale(name)
    (tmp_path / name).write_bytes(b"half a checkpoint")
    assert sweep_stale_temps(tmp_path) == 0 and (tmp_path / name).exists()
    ours = _WRITER.match(temp_name())  # a writer of our namespace that is gone: swept
    assert ours is not None
    assert is_stale(f".smdist-{ours['machine']}-{dead}-{'0' * 16}.tmp")
