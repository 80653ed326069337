"""backends/toolkit/packing.py copy_merged, compression off (issue 32): a stop mid-copy leaves no truncated file under
the final folder (it keeps what was copied in model.partial/, as an archive's .partial), a later collect completes it,
and a sparse file of the job's stays sparse (a few KiB of data in a 1 TiB hole must not fill this machine's disk)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from smdist_launcher.backends.toolkit import packing
from smdist_launcher.backends.toolkit.packing import Folder, PackingStopped, copy_merged

from .packing_trees import random_model, stop_at_second_report


def test_a_stop_while_copying_keeps_the_part_copied_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = random_model(tmp_path, 9 << 20)
    _, stop = stop_at_second_report(monkeypatch)
    dest = tmp_path / "out" / "model"
    with pytest.raises(PackingStopped) as stopped:
        copy_merged([Folder(src)], dest, progress=stop)
    assert not dest.exists()  # never a folder that looks complete and holds a truncated weight file
    partial = dest.with_name("model.partial")
    assert stopped.value.partial == partial and "SIGTERM" in str(stopped.value) and str(partial) in str(stopped.value)
    assert any(p.stat().st_size for p in partial.iterdir())  # what was copied is kept
    assert sorted(p.name for p in src.iterdir()) == ["w0.bin", "w1.bin", "w2.bin"]  # the job's folder as it was
    # the job collected again (a later `smdist` command, a restarted launcher): the stale .partial is reused
    assert copy_merged([Folder(src)], dest) == 3
    assert not partial.exists()
    assert all((dest / p.name).read_bytes() == p.read_bytes() for p in src.iterdir())


def test_a_sparse_file_is_delivered_sparse(tmp_path: Path) -> None:
    src = tmp_path / "model"
    src.mkdir()
    size = 1 << 30
    with open(src / "sparse.bin", "wb") as f:
        f.seek(256 << 20)
        f.write(b"weights")
        f.truncate(size)
    (src / "dense.bin").write_bytes(b"\0" * 8192 + b"tail")
    assert os.stat(src / "sparse.bin").st_blocks * 512 < (1 << 20)  # this file system keeps holes (ext4, tmpfs...)
    dest = tmp_path / "out" / "model"
    assert copy_merged([Folder(src)], dest) == 2
    st = os.stat(dest / "sparse.bin")
    assert st.st_size == size and st.st_blocks * 512 < (1 << 20)
    with open(dest / "sparse.bin", "rb") as f:
        f.seek((256 << 20) - 2)
        assert f.read(11) == b"\0\0weights\0\0"
    assert (dest / "dense.bin").read_bytes() == (src / "dense.bin").read_bytes()


def test_a_folder_to_s3_with_a_name_no_key_can_hold(tmp_path: Path, s3) -> None:  # type: ignore[no-untyped-def]
    """A job's file named with bytes that are no UTF-8: the folder still reaches S3 (that one file stays in the job's
    output folder, as checkpoints do), the job does not fail on it."""
    from smdist_launcher.backends.storage.locations import parse_location
    from smdist_launcher.backends.toolkit.outputs import deliver_folder

    local = tmp_path / "model"
    local.mkdir()
    (local / "config.json").write_text("{}")
    (local / os.fsdecode(b"odd-\xff.bin")).write_bytes(b"x")
    uri = deliver_folder(local, parse_location(f"s3://{s3.bucket}/job/output", field="output_path"))
    assert uri == f"s3://{s3.bucket}/job/output/model/"
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=s3.bucket)["Contents"]]
    assert keys == ["job/output/model/config.json"]


@pytest.mark.parametrize("later", ["file", "folder"])
def test_a_file_on_one_host_and_a_folder_of_that_name_on_another(tmp_path: Path, later: str) -> None:
    """algo-1 saved `x` as a file, algo-2 `x/y` (or the other way round): the later host wins, as for two files of one
    name; both an archive and a folder delivery hold one of them, never both (which no folder can)."""
    import tarfile

    file_host, folder_host = tmp_path / "file-host", tmp_path / "folder-host"
    file_host.mkdir()
    (file_host / "x").write_text("file")
    (folder_host / "x").mkdir(parents=True)
    (folder_host / "x" / "y").write_text("folder")
    folders = [Folder(folder_host), Folder(file_host)] if later == "file" else [Folder(file_host), Folder(folder_host)]
    want = ["x"] if later == "file" else ["x/y"]
    assert packing.pack(folders, tmp_path / "out" / "model.tar.gz") == 1
    with tarfile.open(tmp_path / "out" / "model.tar.gz") as tar:
        assert tar.getnames() == want
    assert copy_merged(folders, tmp_path / "out" / "model") == 1
    assert sorted(p.relative_to(tmp_path / "out" / "model").as_posix()
                  for p in (tmp_path / "out" / "model").rglob("*") if p.is_file()) == want
