from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from smdist_launcher.backends.toolkit.outputs import (
    checkpoint_dir,
    collect_outputs,
    pack_merged,
    restore_checkpoints,
    save_checkpoints,
)
from smdist_launcher.contract import MLPaths

from ..plans import tiny_plan


def _hosts(tmp_path: Path) -> dict[str, MLPaths]:
    hosts = {h: MLPaths(tmp_path / h) for h in ("algo-1", "algo-2")}
    for paths in hosts.values():
        paths.model_dir.mkdir(parents=True)
        paths.output_data_dir.mkdir(parents=True)
    return hosts


def _names(tar_path: Path) -> dict[str, bytes]:
    with tarfile.open(tar_path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_hosts_are_merged_later_host_wins_and_links_are_skipped(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "sub").mkdir(parents=True)
    b.mkdir()
    (a / "model.pth").write_text("from a")
    (a / "sub" / "only-a").write_text("a")
    (b / "model.pth").write_text("from b")
    (b / "secret").symlink_to("/etc/hostname")
    assert pack_merged([a, b], tmp_path / "out" / "model.tar.gz") == 2
    assert _names(tmp_path / "out" / "model.tar.gz") == {"model.pth": b"from b", "sub/only-a": b"a"}


def test_default_outputs_stay_in_the_job_folder(tmp_path):
    hosts = _hosts(tmp_path)
    (hosts["algo-1"].model_dir / "model.pth").write_text("m")
    model, output = collect_outputs(tiny_plan(), hosts, tmp_path / "job" / "output")
    assert model == (tmp_path / "job" / "output" / "model.tar.gz").as_uri()
    assert output is None  # no host wrote output/data


def test_output_path_file_and_s3_follow_sagemaker_layout(tmp_path, s3):
    hosts = _hosts(tmp_path)
    (hosts["algo-2"].model_dir / "model.pth").write_text("m")
    (hosts["algo-1"].output_data_dir / "metrics.json").write_text("{}")
    model, output = collect_outputs(tiny_plan(output_path=f"file://{tmp_path}/results"), hosts, tmp_path / "o1")
    assert model == (tmp_path / "results" / "tiny" / "output" / "model.tar.gz").as_uri()
    assert _names(tmp_path / "results" / "tiny" / "output" / "output.tar.gz") == {"metrics.json": b"{}"}
    model, output = collect_outputs(tiny_plan(output_path=f"s3://{s3.bucket}/runs"), hosts, tmp_path / "o2")
    assert model == f"s3://{s3.bucket}/runs/tiny/output/model.tar.gz"
    assert output == f"s3://{s3.bucket}/runs/tiny/output/output.tar.gz"
    body = s3.get_object(Bucket=s3.bucket, Key="runs/tiny/output/model.tar.gz")["Body"].read()
    assert body == (tmp_path / "o2" / "model.tar.gz").read_bytes()


def test_checkpoints_restore_and_save_through_s3(tmp_path, s3):
    s3.put_object(Bucket=s3.bucket, Key="ckpt/step-1.pt", Body=b"old")
    hosts = _hosts(tmp_path)
    plan = tiny_plan(checkpoint_s3_uri=f"s3://{s3.bucket}/ckpt")
    assert restore_checkpoints(plan, hosts) == 1
    for paths in hosts.values():
        assert (checkpoint_dir(plan, paths) / "step-1.pt").read_bytes() == b"old"
    (checkpoint_dir(plan, hosts["algo-2"]) / "step-2-algo-2.pt").write_bytes(b"new")
    save_checkpoints(plan, hosts)
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=s3.bucket, Prefix="ckpt/")["Contents"])
    assert keys == ["ckpt/step-1.pt", "ckpt/step-2-algo-2.pt"]


def test_checkpoint_local_path_maps_into_the_sandbox(tmp_path):
    paths = MLPaths(tmp_path / "algo-1")
    assert checkpoint_dir(tiny_plan(), paths) == paths.checkpoints_dir
    assert checkpoint_dir(tiny_plan(checkpoint_local_path="/opt/ml/ckpt/run1"), paths) == paths.root / "ckpt/run1"
    assert checkpoint_dir(tiny_plan(checkpoint_local_path="/data/ckpt"), paths) == paths.checkpoints_dir


def test_checkpoints_through_a_local_folder(tmp_path):
    store = tmp_path / "store"
    (store / "deep").mkdir(parents=True)
    (store / "deep" / "old.pt").write_text("old")
    hosts = _hosts(tmp_path)
    plan = tiny_plan(checkpoint_s3_uri=store.as_uri())
    assert restore_checkpoints(plan, hosts) == 1
    (checkpoint_dir(plan, hosts["algo-1"]) / "new.pt").write_text("new")
    assert save_checkpoints(plan, hosts) == 3  # old.pt from both hosts, new.pt from algo-1
    assert sorted(p.relative_to(store).as_posix() for p in store.rglob("*.pt")) == ["deep/old.pt", "new.pt"]


def test_the_metrics_store_is_delivered_merged_next_to_the_archives(tmp_path):
    from smdist_launcher.metrics.store import MetricPoint, MetricWriter, host_store_file, read_file

    job = tmp_path / "job"
    hosts = _hosts(tmp_path)
    for host, t in (("algo-2", 2.0), ("algo-1", 1.0)):  # two Slurm nodes' files
        writer = MetricWriter(job / host_store_file(host))
        writer.write(MetricPoint("loss", t, t, host, rank=0))
        writer.close()
    collect_outputs(tiny_plan(output_path=f"file://{tmp_path}/results"), hosts, job / "output")
    delivered = tmp_path / "results" / "tiny" / "output" / "metrics.jsonl"
    assert [(p.host, p.value) for p in read_file(delivered)] == [("algo-1", 1.0), ("algo-2", 2.0)]


def test_a_job_without_metrics_delivers_no_store(tmp_path):
    collect_outputs(tiny_plan(), _hosts(tmp_path), tmp_path / "job" / "output")
    assert not (tmp_path / "job" / "output" / "metrics.jsonl").exists()


# ---- checkpoints of a host folder the job owns: links it planted are never followed (issue 28) -------------------
def _owned_checkpoints(tmp_path: Path) -> tuple[dict[str, MLPaths], Path]:
    paths = MLPaths(tmp_path / "job" / "hosts" / "algo-1" / "opt" / "ml")
    paths.checkpoints_dir.mkdir(parents=True)
    outside = tmp_path / "root-ssh"
    outside.mkdir()
    (outside / "id_rsa").write_bytes(b"PRIVATE KEY")
    return {"algo-1": paths}, outside


def test_saving_checkpoints_reads_nothing_through_a_planted_link(tmp_path, s3):
    hosts, outside = _owned_checkpoints(tmp_path)
    ckpt = hosts["algo-1"].checkpoints_dir
    (ckpt / "step-1.pt").write_bytes(b"weights")
    (ckpt / "key").symlink_to(outside / "id_rsa")
    (ckpt / "ssh").symlink_to(outside)
    store = tmp_path / "store"
    assert save_checkpoints(tiny_plan(1, checkpoint_s3_uri=store.as_uri()), hosts) == 1
    assert sorted(p.name for p in store.rglob("*")) == ["step-1.pt"]
    ckpt.rename(tmp_path / "moved")
    ckpt.symlink_to(outside)  # the checkpoint folder itself: root's ssh keys
    assert save_checkpoints(tiny_plan(1, checkpoint_s3_uri=(tmp_path / "store2").as_uri()), hosts) == 0
    assert save_checkpoints(tiny_plan(1, checkpoint_s3_uri=f"s3://{s3.bucket}/leak"), hosts) == 0
    assert not list((tmp_path / "store2").rglob("*"))
    assert "Contents" not in s3.list_objects_v2(Bucket=s3.bucket, Prefix="leak/")


def test_restoring_checkpoints_writes_nothing_through_a_planted_link(tmp_path):
    hosts, outside = _owned_checkpoints(tmp_path)
    store = tmp_path / "store"
    store.mkdir()
    (store / "id_rsa").write_bytes(b"restored checkpoint")
    ckpt = hosts["algo-1"].checkpoints_dir
    (ckpt / "id_rsa").symlink_to(outside / "id_rsa")  # a file link: replaced, not written through
    plan = tiny_plan(1, checkpoint_s3_uri=store.as_uri())
    assert restore_checkpoints(plan, hosts) == 1
    assert (outside / "id_rsa").read_bytes() == b"PRIVATE KEY"
    assert (ckpt / "id_rsa").read_bytes() == b"restored checkpoint"
    ckpt.rename(tmp_path / "moved")
    ckpt.symlink_to(outside)  # the folder itself a link: refused
    with pytest.raises(NotADirectoryError):
        restore_checkpoints(plan, hosts)
    assert sorted(p.name for p in outside.iterdir()) == ["id_rsa"]
    assert (outside / "id_rsa").read_bytes() == b"PRIVATE KEY"


def test_a_checkpoint_local_path_leaving_opt_ml_stays_in_the_sandbox(tmp_path):
    paths = MLPaths(tmp_path / "algo-1")
    plan = tiny_plan().model_copy(update={"checkpoint_local_path": "/opt/ml/../../../../etc/cron.d"})
    assert checkpoint_dir(plan, paths) == paths.checkpoints_dir


def test_a_checkpoint_name_s3_cannot_hold_is_skipped_not_fatal(tmp_path, s3):
    """A job may name a file with bytes that are no UTF-8 (S3 keys must be): that one file is left out, and every
    other host's checkpoints are still saved (a failed save between attempts would end the retries)."""
    import os

    hosts = _hosts(tmp_path)
    plan = tiny_plan(checkpoint_s3_uri=f"s3://{s3.bucket}/ckpt")
    for paths in hosts.values():
        checkpoint_dir(plan, paths).mkdir(parents=True)
    with open(os.path.join(os.fsencode(checkpoint_dir(plan, hosts["algo-1"])), b"bad-\xff.pt"), "wb") as f:
        f.write(b"x")
    (checkpoint_dir(plan, hosts["algo-2"]) / "step-2.pt").write_bytes(b"new")
    assert save_checkpoints(plan, hosts) == 1
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=s3.bucket, Prefix="ckpt/")["Contents"])
    assert keys == ["ckpt/step-2.pt"]


def test_a_full_disk_at_output_path_leaves_no_truncated_archive(tmp_path):
    """output_path on a disk that fills during the copy: the copy fails, and no truncated model.tar.gz lies under the
    name the model is looked for by, nor a temporary file (before: shutil.copy2 wrote the final name directly)."""
    from .small_disk import on_small_disk

    found = on_small_disk(tmp_path, '''
from smdist_launcher.backends.storage.locations import Location
from smdist_launcher.backends.toolkit.outputs import deliver
local = Path(sys.argv[0]).parent / "model.tar.gz"  # on the real disk
local.write_bytes(os.urandom(512 << 10))
try:
    deliver(local, Location(disk.as_uri(), path=disk))
    error = None
except OSError as exc:
    error = exc.strerror
print(json.dumps({"error": error, "left": sorted(p.name for p in disk.iterdir())}))
''')
    assert found == {"error": "No space left on device", "left": []}


def test_a_full_disk_at_output_path_leaves_no_truncated_model_folder(tmp_path):
    """The same with compression off (the model delivered as a folder): no model/ of truncated files is left where
    model_data points, nor a temporary folder (before: shutil.copytree filled the final folder directly)."""
    from .small_disk import on_small_disk

    found = on_small_disk(tmp_path, '''
from smdist_launcher.backends.storage.locations import Location
from smdist_launcher.backends.toolkit.outputs import deliver_folder
local = Path(sys.argv[0]).parent / "model"  # on the real disk
local.mkdir()
for name in ("a.bin", "b.bin"):
    (local / name).write_bytes(os.urandom(192 << 10))
try:
    deliver_folder(local, Location(disk.as_uri(), path=disk))
    error = None
except OSError as exc:
    error = "No space left on device" in str(exc)
print(json.dumps({"error": error, "left": sorted(p.name for p in disk.iterdir())}))
''')
    assert found == {"error": True, "left": []}


def test_a_full_disk_while_saving_checkpoints_keeps_the_last_good_one(tmp_path):
    """checkpoint_s3_uri a local folder on a disk that fills while the new latest.pt is copied: the copy fails, and
    the latest.pt saved before is still whole there, for the next attempt to restore (before: it was overwritten in
    place and left truncated), with no temporary file beside it."""
    from .small_disk import on_small_disk

    found = on_small_disk(tmp_path, '''
from smdist_launcher.backends.toolkit.outputs import checkpoint_dir, save_checkpoints
from smdist_launcher.contract import MLPaths
from backends.plans import tiny_plan
store = disk / "store"
store.mkdir()
old = os.urandom(96 << 10)
(store / "latest.pt").write_bytes(old)
host = MLPaths(Path(sys.argv[0]).parent / "algo-1" / "opt" / "ml")  # on the real disk
plan = tiny_plan(checkpoint_s3_uri=store.as_uri())
checkpoint_dir(plan, host).mkdir(parents=True)
(checkpoint_dir(plan, host) / "latest.pt").write_bytes(os.urandom(192 << 10))
fill()
try:
    save_checkpoints(plan, {"algo-1": host})
    error = None
except OSError as exc:
    error = exc.strerror
print(json.dumps({"error": error, "kept": (store / "latest.pt").read_bytes() == old,
                  "left": sorted(p.name for p in store.iterdir())}))
''')
    assert found == {"error": "No space left on device", "kept": True, "left": ["latest.pt"]}


# ---- temp files a copy killed mid-way left behind ---------------------------------------------------------------
_KILLED_COPY = '''
import os, sys, time
from smdist_launcher.contract.no_follow import write_stream_at
def chunks():
    yield b"half a checkpoint"
    print("writing", flush=True)
    time.sleep(600)
write_stream_at(os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY), sys.argv[2], chunks())
'''


def _killed_copy(folder: Path, name: str) -> Path:
    """What a copy of `name` into `folder` killed mid-way (SIGKILL) leaves there: its temp file."""
    before = set(folder.iterdir())
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_COPY, str(folder), name], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"writing\n"
    proc.kill()
    proc.wait()
    (left,) = set(folder.iterdir()) - before
    return left


def _temp_like(temp: Path, pid: int, token: str) -> Path:
    """A temp file name beside `temp` (a killed copy's), of the same machine but of writer `pid`."""
    machine, _pid, _token = temp.name.rsplit("-", 2)
    return temp.with_name(f"{machine}-{pid}-{token * 16}.tmp")


def test_a_sync_sweeps_the_temp_files_killed_copies_left_and_copies_none(tmp_path):
    """A save into the local store killed mid-copy left a temp file there, and a restore killed mid-copy one in the
    host's checkpoint folder: the next sync removes both and carries neither; the real checkpoints are untouched, a
    live writer's temp file stays, and a link named like a stale temp file is left as it is, its target too (before:
    the stale files stayed for ever and were saved and restored as checkpoints)."""
    hosts, outside = _owned_checkpoints(tmp_path)
    ckpt = hosts["algo-1"].checkpoints_dir
    store = tmp_path / "store"
    store.mkdir()
    (store / "epoch-1.pt").write_bytes(b"epoch 1")
    (ckpt / "epoch-2.pt").write_bytes(b"epoch 2")
    stale_store, stale_host = _killed_copy(store, "epoch-2.pt"), _killed_copy(ckpt, "epoch-1.pt")
    link = _temp_like(stale_host, int(stale_host.name.rsplit("-", 2)[1]), "0")  # its writer dead too
    link.symlink_to(outside / "id_rsa")
    with subprocess.Popen(["sleep", "60"]) as writer:  # another job's save into the same store, still writing
        live = _temp_like(stale_store, writer.pid, "1")
        live.write_bytes(b"being written")
        try:
            assert save_checkpoints(tiny_plan(1, checkpoint_s3_uri=store.as_uri()), hosts) == 1
            assert sorted(p.name for p in store.iterdir()) == sorted(["epoch-1.pt", "epoch-2.pt", live.name])
        finally:
            writer.kill()
    assert (store / "epoch-1.pt").read_bytes() == b"epoch 1" and (store / "epoch-2.pt").read_bytes() == b"epoch 2"
    assert live.read_bytes() == b"being written"
    assert sorted(p.name for p in ckpt.iterdir()) == sorted(["epoch-2.pt", link.name])
    assert link.is_symlink() and (outside / "id_rsa").read_bytes() == b"PRIVATE KEY"
    assert not stale_store.exists() and not stale_host.exists()


def test_the_next_attempts_restore_sweeps_the_store_and_restores_no_temp_file(tmp_path):
    """The store holds a temp file a killed save left and one a live writer is writing: the restore of the next
    attempt removes the stale one, restores neither, and the checkpoints whole."""
    hosts, _outside = _owned_checkpoints(tmp_path)
    store = tmp_path / "store"
    store.mkdir()
    (store / "epoch-1.pt").write_bytes(b"epoch 1")
    stale = _killed_copy(store, "epoch-2.pt")
    with subprocess.Popen(["sleep", "60"]) as writer:
        live = _temp_like(stale, writer.pid, "1")
        live.write_bytes(b"being written")
        try:
            assert restore_checkpoints(tiny_plan(1, checkpoint_s3_uri=store.as_uri()), hosts) == 1
            assert sorted(p.name for p in store.iterdir()) == sorted(["epoch-1.pt", live.name])
        finally:
            writer.kill()
    assert not stale.exists()
    assert [p.name for p in hosts["algo-1"].checkpoints_dir.iterdir()] == ["epoch-1.pt"]
    assert (hosts["algo-1"].checkpoints_dir / "epoch-1.pt").read_bytes() == b"epoch 1"
