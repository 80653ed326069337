"""After the hosts end: model/ of every host → model.tar.gz, output/data → output.tar.gz,
delivered to output_path; checkpoints synced with checkpoint_s3_uri.

Like SageMaker local mode, the hosts' folders are merged (a later host's file replaces an
earlier host's file of the same name). Only regular files are packed: a symlink could point
anywhere on this machine. Without output_path the archives stay in <job>/output/; with one
they go to <output_path>/<job name>/output/ (SageMaker's layout), file:// or s3://.
With compression off (disable_output_compression / CompressionType NONE, output_settings.py)
the merged folders are delivered as they are: output/model/... and output/data/..., and
model_data names the model folder. Packing and copying: packing.py."""
from __future__ import annotations

import os
import posixpath
import secrets
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ...contract import MLPaths
from ...contract.no_follow import (
    copy_into,
    copy_out,
    host_anchor,
    open_dir_nofollow,
    regular_files,
    sweep_stale_temps,
    write_stream_nofollow,
)
from ...contract.write_temps import is_temp_name
from ...metrics.store import STORE_FILE, iter_points, store_files
from ...plan.model import LaunchPlan
from ..states import JobState
from ..storage import s3 as s3io
from ..storage.locations import Location, parse_location
from .output_settings import Compression, OutputSettings
from .packing import PARTIAL, Folder, Progress, copy_merged, pack
from .supervisor import Interrupted

CONTAINER_ROOT = "/opt/ml"


def pack_merged(folders: list[Path], tar_path: Path, progress: Progress | None = None) -> int:
    """Pack the union of `folders` (later ones win) into a gzipped tar; returns the file count (0: no archive)."""
    return pack([Folder(f) for f in folders], tar_path, progress=progress)


def _host_folders(hosts: dict[str, MLPaths], sub: str) -> list[Folder]:
    """Each host's `sub` folder (model, output/data) below the host folder the job cannot replace."""
    out = []
    for paths in hosts.values():
        root, relative = host_anchor(paths.root)
        out.append(Folder(root, relative / sub))
    return out


def destination(plan: LaunchPlan, job_output_dir: Path) -> Location:
    if not plan.output_path:
        return Location(job_output_dir.as_uri(), path=job_output_dir)
    return parse_location(plan.output_path, field="output_path").child(plan.job_name, "output")


def _whole_or_nothing(target: Path, copy: Callable[[Path], object]) -> None:
    """`copy(partial)` under a temporary name beside `target`, renamed over it when whole (an earlier folder of that
    name replaced): a full disk or a stop mid-copy never leaves a truncated model.tar.gz, or a folder of truncated
    files, under the name model_data gives. The name is this delivery's own: two jobs of the same name delivering to
    one output_path (from two jobs folders) never write into one file."""
    partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}{PARTIAL}")
    try:
        copy(partial)
    except BaseException:
        if partial.is_dir() and not partial.is_symlink():
            shutil.rmtree(partial, ignore_errors=True)
        else:
            partial.unlink(missing_ok=True)
        raise
    if target.is_dir() and not target.is_symlink():  # an earlier delivery of the same folder
        shutil.rmtree(target)
    os.replace(partial, target)


def deliver(local_file: Path, dest_dir: Location) -> str:
    """Copy/upload `local_file` into `dest_dir`; returns its final URI."""
    target = dest_dir.child(local_file.name)
    if target.is_s3:
        s3io.upload_file(s3io.client(), local_file, target)
    else:
        assert target.path is not None
        if target.path != local_file:
            target.path.parent.mkdir(parents=True, exist_ok=True)
            _whole_or_nothing(target.path, lambda partial: shutil.copy2(local_file, partial))
    return target.uri


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def deliver_folder(local_dir: Path, dest_dir: Location) -> str:
    """Copy/upload the folder `local_dir` (ours) into `dest_dir` under its name; returns its URI (ending in /)."""
    target = dest_dir.child(local_dir.name)
    if target.is_s3:
        s3 = s3io.client()
        for rel, f, _st in regular_files(local_dir):
            if not _is_utf8(rel):  # bytes that are no UTF-8 (the job's choice): no S3 key can hold it; kept here
                continue
            s3.upload_fileobj(f, target.bucket, target.child(rel).key)
    else:
        assert target.path is not None
        if target.path != local_dir:
            _whole_or_nothing(target.path, lambda partial: shutil.copytree(local_dir, partial))
    return target.uri.rstrip("/") + "/"


def collect_outputs(plan: LaunchPlan, hosts: dict[str, MLPaths], job_output_dir: Path,
                    progress: Progress | None = None,
                    delivered: dict[str, str] | None = None) -> tuple[str | None, str | None]:
    """(model_data URI or None when no host saved a model, output_data URI or None). `progress` hears how far a
    pack or copy that takes more than a few seconds is. `delivered` (when given) gets each URI as soon as it is
    delivered ("model_data", "output_data"): what a later step's failure (the output archive, the metrics) keeps."""
    dest = destination(plan, job_output_dir)
    done: dict[str, str] = {} if delivered is None else delivered
    if OutputSettings.load(job_output_dir.parent).compression is Compression.NONE:
        # SageMaker's uncompressed layout: <output>/model/..., <output>/data/...
        for sub, name in (("model", "model"), ("output/data", "data")):
            local = job_output_dir / name
            if copy_merged(_host_folders(hosts, sub), local, progress=progress):
                done["model_data" if name == "model" else "output_data"] = deliver_folder(local, dest)
    else:
        model_tar, output_tar = job_output_dir / "model.tar.gz", job_output_dir / "output.tar.gz"
        if pack(_host_folders(hosts, "model"), model_tar, progress=progress):
            done["model_data"] = deliver(model_tar, dest)
        if pack(_host_folders(hosts, "output/data"), output_tar, progress=progress):
            done["output_data"] = deliver(output_tar, dest)
    deliver_metrics(job_output_dir.parent, job_output_dir, dest)
    return done.get("model_data"), done.get("output_data")


@dataclass(frozen=True)
class Delivered:
    """What the end of a job delivered: model_data/output_data URIs (None: nothing, or their delivery failed) and the
    first failure (the outputs', else the checkpoints')."""

    model_data: str | None = None
    output_data: str | None = None
    error: Exception | None = None

    @property
    def stopped_by(self) -> str | None:
        """The signal's name when the failure was a stop of the launcher (SIGTERM, SIGHUP) while delivering: the
        job was stopped, not failed (it ended `Failed: uploading outputs failed: SIGTERM` before, issue 32)."""
        exc: BaseException | None = self.error
        while exc is not None:
            if isinstance(exc, Interrupted):
                return "Ctrl-C" if exc.signal_name == "SIGINT" else exc.signal_name
            exc = exc.__cause__
        return None

    def settle(self, status: JobState | str, reason: str,
               failed: str = "uploading outputs failed") -> tuple[JobState, str]:
        """The job's (status, reason) once its end delivered this, as every backend decides it: a job that completed
        but whose delivery failed is Failed with `failed` and the error, or Stopped when that failure was a stop of
        the launcher; any other end stays as it was."""
        state = JobState.of(status)
        if self.error is None or state is not JobState.COMPLETED:
            return state, reason
        if self.stopped_by:
            return JobState.STOPPED, f"stopped by {self.stopped_by} while uploading outputs: {self.error}"
        return JobState.FAILED, f"{failed}: {self.error}"


def deliver_job_outputs(plan: LaunchPlan, hosts: dict[str, MLPaths], job_output_dir: Path,
                        progress: Progress | None = None) -> Delivered:
    """collect_outputs, then save_checkpoints also when the outputs failed: a full disk or a stop while packing the
    model must not cost the checkpoints' upload too (every backend's end: local, recovery, Slurm's finish)."""
    delivered: dict[str, str] = {}  # what was delivered before a failure: the record keeps it
    error: Exception | None = None
    try:
        collect_outputs(plan, hosts, job_output_dir, progress=progress, delivered=delivered)
    except Exception as exc:  # noqa: BLE001 - the caller records it as the job's upload failure
        error = exc
    except KeyboardInterrupt as exc:  # Ctrl-C while packing: a stop like SIGTERM's, the checkpoints still go
        error = Interrupted(signal.SIGINT)
        error.__cause__ = exc
    try:
        save_checkpoints(plan, hosts)
    except Exception as exc:  # noqa: BLE001 - as above; the outputs' failure, if any, is the one to tell
        error = error or exc
    return Delivered(delivered.get("model_data"), delivered.get("output_data"), error)


def deliver_metrics(job_root: Path, job_output_dir: Path, dest: Location) -> str | None:
    """The job's metrics store (every host's file merged, oldest point first) as metrics.jsonl next to
    output.tar.gz; None when the job recorded no metrics."""
    if not store_files(job_root):
        return None
    merged = job_output_dir / STORE_FILE
    merged.parent.mkdir(parents=True, exist_ok=True)
    with open(merged, "w", encoding="utf-8") as out:  # a line at a time: a chatty job's store reaches gigabytes
        for p in iter_points(job_root):
            out.write(p.to_json() + "\n")
    return deliver(merged, dest)


# ---- checkpoints --------------------------------------------------------------------------------
# The host's checkpoint folder belongs to the job, which may have planted links in it (also between attempts): it is
# read and written only by descriptor walks from the host's trusted folder (contract/no_follow.py), so a restore
# never writes through a link and a save never reads through one (`checkpoints/x -> /root/.ssh/id_rsa`).
# A copy killed mid-way (SIGKILL of the launcher, a lost node) leaves its temp file (.smdist-*.tmp, write_temps.py)
# in the folder it wrote to: a restore sweeps the stale ones from a local store, a save from the host's folder (a
# restore into it was killed) and the store (never a live writer's, never through a link), and no copy carries one,
# stale or live, as if it were a checkpoint. A host's folder is fresh when restored into (attempt/host_staging.py).
def _checkpoint_relative(plan: LaunchPlan) -> PurePosixPath:
    """checkpoint_local_path below the container's /opt/ml; outside it (or leaving it with `..`): checkpoints/."""
    local = posixpath.normpath(plan.checkpoint_local_path or f"{CONTAINER_ROOT}/checkpoints")
    if local.startswith(CONTAINER_ROOT + "/"):
        return PurePosixPath(local[len(CONTAINER_ROOT) + 1:])
    return PurePosixPath("checkpoints")


def checkpoint_dir(plan: LaunchPlan, paths: MLPaths) -> Path:
    """checkpoint_local_path is a path inside the container (default /opt/ml/checkpoints), mapped
    into the host's sandbox. A path outside /opt/ml maps to the sandbox's checkpoints/: a real
    path on this machine would be shared by every simulated host."""
    return paths.root.joinpath(*_checkpoint_relative(plan).parts)


def _checkpoint_anchor(plan: LaunchPlan, paths: MLPaths) -> tuple[Path, PurePosixPath]:
    """(trusted root, relative folder) of the host's checkpoint folder."""
    root, ml = host_anchor(paths.root)
    return root, PurePosixPath(ml.as_posix(), *_checkpoint_relative(plan).parts)


def _checkpoint_location(plan: LaunchPlan) -> Location | None:
    if not plan.checkpoint_s3_uri:
        return None
    return parse_location(plan.checkpoint_s3_uri, field="checkpoint_s3_uri")


def _fetch_tree(loc: Location, root: Path, relative: PurePosixPath) -> int:
    """Everything under `loc` (s3:// prefix or local folder) into the job's folder root/relative; returns the file
    count."""
    os.close(open_dir_nofollow(root, relative, create=True))  # the folder exists even with nothing to restore
    if loc.is_s3:
        s3 = s3io.client()
        objects = s3io.list_objects(s3, loc)
        for key, rel in objects:
            body = s3.get_object(Bucket=loc.bucket, Key=key)["Body"]
            with body:
                write_stream_nofollow(root, relative.joinpath(*rel.parts), body.iter_chunks(s3io.CHUNK_BYTES))
        return len(objects)
    assert loc.path is not None
    sweep_stale_temps(loc.path)  # what a save killed mid-copy left in the store (a dead writer's only)
    return copy_into(loc.path, root, relative, skip=is_temp_name)


def _send_tree(root: Path, relative: PurePosixPath, loc: Location) -> int:
    """The regular files of the job's folder root/relative to `loc` (s3:// prefix or local folder); returns the file
    count. Links and special files are skipped, never followed."""
    sweep_stale_temps(root, relative)  # what a restore killed mid-copy left in the host's folder
    if not loc.is_s3:
        assert loc.path is not None
        sweep_stale_temps(loc.path)
        return copy_out(root, relative, loc.path, skip=is_temp_name)
    s3 = s3io.client()
    count = 0
    for rel, f, _st in regular_files(root, relative, skip=is_temp_name):
        if not _is_utf8(rel):  # a name of bytes that are no UTF-8 (the job's choice): no S3 key can hold it
            continue
        target = loc.child(rel)
        s3.upload_fileobj(f, target.bucket, target.key)
        count += 1
    return count


def restore_checkpoints(plan: LaunchPlan, hosts: dict[str, MLPaths]) -> int:
    """Before start: every host gets the checkpoints already at checkpoint_s3_uri (SageMaker does this)."""
    loc = _checkpoint_location(plan)
    counts = [_fetch_tree(loc, *_checkpoint_anchor(plan, paths)) for paths in hosts.values()] if loc else [0]
    return max(counts)


def save_checkpoints(plan: LaunchPlan, hosts: dict[str, MLPaths]) -> int:
    """After the job (also a failed one: that is what checkpoints are for): every host's files to
    checkpoint_s3_uri, merged (a later host's file replaces an earlier host's of the same name)."""
    loc = _checkpoint_location(plan)
    if loc is None:
        return 0
    return sum(_send_tree(*_checkpoint_anchor(plan, p), loc) for p in hosts.values())
