"""After the hosts end: model/ of every host → model.tar.gz, output/data → output.tar.gz,
delivered to output_path; checkpoints synced with checkpoint_s3_uri.

Like SageMaker local mode, the hosts' folders are merged (a later host's file replaces an
earlier host's file of the same name). Only regular files are packed: a symlink could point
anywhere on this machine. Without output_path the archives stay in <job>/output/; with one
they go to <output_path>/<job name>/output/ (SageMaker's layout), file:// or s3://."""
from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

from ...contract import MLPaths
from ...metrics.store import STORE_FILE, read_points, store_files
from ...plan.model import LaunchPlan
from ..storage import s3 as s3io
from ..storage.locations import Location, parse_location

CONTAINER_ROOT = "/opt/ml"


def _regular_files(root: Path) -> dict[str, Path]:
    if not root.is_dir():
        return {}
    return {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


def pack_merged(folders: list[Path], tar_path: Path) -> int:
    """Pack the union of `folders` (later ones win) into a gzipped tar; returns the file count."""
    merged: dict[str, Path] = {}
    for folder in folders:
        merged.update(_regular_files(folder))
    tar_path.parent.mkdir(parents=True, exist_ok=True)
    # Level 1: model weights barely compress, and level 9 costs seconds per 100 MB.
    with tarfile.open(tar_path, "w:gz", compresslevel=1) as tar:
        for name in sorted(merged):
            tar.add(merged[name], arcname=name, recursive=False)
    return len(merged)


def destination(plan: LaunchPlan, job_output_dir: Path) -> Location:
    if not plan.output_path:
        return Location(job_output_dir.as_uri(), path=job_output_dir)
    return parse_location(plan.output_path, field="output_path").child(plan.job_name, "output")


def deliver(local_file: Path, dest_dir: Location) -> str:
    """Copy/upload `local_file` into `dest_dir`; returns its final URI."""
    target = dest_dir.child(local_file.name)
    if target.is_s3:
        s3io.upload_file(s3io.client(), local_file, target)
    else:
        assert target.path is not None
        if target.path != local_file:
            target.path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(local_file, target.path)
    return target.uri


def collect_outputs(plan: LaunchPlan, hosts: dict[str, MLPaths], job_output_dir: Path) -> tuple[str | None, str | None]:
    """(model_data URI or None when no host saved a model, output_data URI or None)."""
    dest = destination(plan, job_output_dir)
    model_tar, output_tar = job_output_dir / "model.tar.gz", job_output_dir / "output.tar.gz"
    model_data = output_data = None
    if pack_merged([p.model_dir for p in hosts.values()], model_tar):
        model_data = deliver(model_tar, dest)
    if pack_merged([p.output_data_dir for p in hosts.values()], output_tar):
        output_data = deliver(output_tar, dest)
    deliver_metrics(job_output_dir.parent, job_output_dir, dest)
    return model_data, output_data


def deliver_metrics(job_root: Path, job_output_dir: Path, dest: Location) -> str | None:
    """The job's metrics store (every host's file merged, oldest point first) as metrics.jsonl next to
    output.tar.gz; None when the job recorded no metrics."""
    if not store_files(job_root):
        return None
    merged = job_output_dir / STORE_FILE
    merged.parent.mkdir(parents=True, exist_ok=True)
    merged.write_text("".join(p.to_json() + "\n" for p in read_points(job_root)), encoding="utf-8")
    return deliver(merged, dest)


# ---- checkpoints --------------------------------------------------------------------------------
def checkpoint_dir(plan: LaunchPlan, paths: MLPaths) -> Path:
    """checkpoint_local_path is a path inside the container (default /opt/ml/checkpoints), mapped
    into the host's sandbox. A path outside /opt/ml maps to the sandbox's checkpoints/: a real
    path on this machine would be shared by every simulated host."""
    local = (plan.checkpoint_local_path or f"{CONTAINER_ROOT}/checkpoints").rstrip("/")
    if local.startswith(CONTAINER_ROOT + "/"):
        return paths.root / local[len(CONTAINER_ROOT) + 1:]
    return paths.checkpoints_dir


def _checkpoint_location(plan: LaunchPlan) -> Location | None:
    if not plan.checkpoint_s3_uri:
        return None
    return parse_location(plan.checkpoint_s3_uri, field="checkpoint_s3_uri")


def _fetch_tree(loc: Location, dest: Path) -> int:
    """Everything under `loc` (s3:// prefix or local folder) into `dest`; returns the file count."""
    dest.mkdir(parents=True, exist_ok=True)
    if loc.is_s3:
        s3 = s3io.client()
        objects = s3io.list_objects(s3, loc)
        s3io.download(s3, loc, objects, dest)
        return len(objects)
    assert loc.path is not None
    files = _regular_files(loc.path)
    for rel, path in files.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest / rel)
    return len(files)


def _send_tree(src: Path, loc: Location) -> int:
    """The regular files of `src` to `loc` (s3:// prefix or local folder); returns the file count."""
    if loc.is_s3:
        return s3io.upload_tree(s3io.client(), src, loc)
    assert loc.path is not None
    files = _regular_files(src)
    for rel, path in files.items():
        (loc.path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, loc.path / rel)
    return len(files)


def restore_checkpoints(plan: LaunchPlan, hosts: dict[str, MLPaths]) -> int:
    """Before start: every host gets the checkpoints already at checkpoint_s3_uri (SageMaker does this)."""
    loc = _checkpoint_location(plan)
    counts = [_fetch_tree(loc, checkpoint_dir(plan, paths)) for paths in hosts.values()] if loc else [0]
    return max(counts)


def save_checkpoints(plan: LaunchPlan, hosts: dict[str, MLPaths]) -> int:
    """After the job (also a failed one: that is what checkpoints are for): every host's files to
    checkpoint_s3_uri, merged (a later host's file replaces an earlier host's of the same name)."""
    loc = _checkpoint_location(plan)
    if loc is None:
        return 0
    return sum(_send_tree(checkpoint_dir(plan, p), loc) for p in hosts.values() if checkpoint_dir(plan, p).is_dir())
