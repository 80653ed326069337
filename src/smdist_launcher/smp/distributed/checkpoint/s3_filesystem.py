"""``torch.sagemaker.distributed.checkpoint.s3_filesystem``: DCP checkpoints whose ``checkpoint_id`` is ``s3://bucket/key``.

Each rank stages its shard files with DCP's own ``FileSystemWriter`` in a private temporary folder and uploads them
to ``s3://bucket/key/<file>``; the coordinator uploads ``.metadata`` last (in ``finish``, after every rank's files
are up), so a prefix with a ``.metadata`` is a complete checkpoint. The reader downloads ``.metadata`` and only the
files its read plan names, then reads them with ``FileSystemReader``. Staging keeps DCP's file format, planners and
``async_save`` staging exactly as they are. boto3 is imported when a writer/reader is made (the GPU image may lack it);
the endpoint comes from :mod:`smdist_launcher.contract.s3_endpoint` (MinIO/moto)."""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.metadata import Metadata
from torch.distributed.checkpoint.planner import LoadPlan, LoadPlanner, SavePlan, SavePlanner
from torch.futures import Future

from ....contract.s3_endpoint import s3_endpoint, s3_region

__all__ = ["S3FileSystemReader", "S3FileSystemWriter", "parse_s3_uri"]

_T = TypeVar("_T")
_METADATA = ".metadata"
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]$")
# FileSystemWriter options a caller may pass through; SMP-only options are accepted and ignored.
_WRITER_OPTIONS = ("single_file_per_rank", "sync_files", "thread_count", "per_thread_copy_ahead",
                   "cache_staged_state_dict", "overwrite")
_CLIENTS = threading.local()  # per thread: DCP writes from async_save's background thread


def parse_s3_uri(uri: Any) -> tuple[str, str]:
    """``s3://bucket/some/key/`` -> ``("bucket", "some/key")``; a ValueError says what is wrong otherwise."""
    text = os.fspath(uri) if isinstance(uri, os.PathLike) else uri
    if not isinstance(text, str) or not text.startswith("s3://"):
        raise ValueError(f"S3 checkpoint_id {uri!r} is not an s3:// URI; pass s3://<bucket>/<prefix>")
    bucket, _, key = text[len("s3://"):].partition("/")
    if not _BUCKET_NAME.fullmatch(bucket) or ".." in bucket:
        raise ValueError(f"S3 checkpoint_id {text!r}: bucket name {bucket!r} is not a valid S3 bucket name "
                         "(3-63 characters: lowercase letters, digits, '.', '-'); pass s3://<bucket>/<prefix>")
    key = key.strip("/")
    if any(part in ("", ".", "..") for part in key.split("/")) and key:
        raise ValueError(f"S3 checkpoint_id {text!r}: key {key!r} has an empty, '.' or '..' part; "
                         "pass s3://<bucket>/<prefix> with a plain prefix")
    return bucket, key


def _require_boto3() -> None:
    try:
        import boto3  # noqa: F401
    except ImportError as err:
        raise ImportError("torch.sagemaker.distributed.checkpoint.s3_filesystem needs boto3 to reach S3, which is "
                          "not installed in this environment: `pip install boto3`, or save to a local/shared path "
                          "(SageMaker uploads /opt/ml/checkpoints to S3 itself)") from err


def _client(region: str | None) -> Any:
    """One boto3 S3 client per thread and endpoint: a session is not safe to share while it builds a client."""
    endpoint, region = s3_endpoint(), region or s3_region()
    cache = getattr(_CLIENTS, "by_target", None)
    if cache is None:
        cache = _CLIENTS.by_target = {}
    if (endpoint, region) not in cache:
        import boto3

        cache[(endpoint, region)] = boto3.session.Session().client("s3", endpoint_url=endpoint, region_name=region)
    return cache[(endpoint, region)]


def _error_code(err: BaseException) -> str:
    return str(getattr(err, "response", {}).get("Error", {}).get("Code", ""))


def _remove_folders(folders: set[str]) -> None:
    for folder in list(folders):
        shutil.rmtree(folder, ignore_errors=True)
        folders.discard(folder)


class _S3Prefix:
    """The S3 side shared by writer and reader: the URI, its bucket/prefix, clear errors, staging folders."""

    def __init__(self, uri: Any, region: str | None, staging_dir: str | None) -> None:
        _require_boto3()
        self._set_uri(uri)
        self._region = region
        self._staging_dir = staging_dir
        self._folders: set[str] = set()
        # Staging folders go when the object does (a failed save never reaches its cleanup step).
        weakref.finalize(self, _remove_folders, self._folders)

    # before DCP's FileSystemWriter/Reader in both classes' MRO: the checkpoint is the s3:// URI, not a folder
    @property
    def checkpoint_id(self) -> str:
        return self._uri

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Any) -> bool:
        return isinstance(checkpoint_id, str) and checkpoint_id.startswith("s3://")

    def _set_uri(self, uri: Any) -> None:
        self._bucket, self._key = parse_s3_uri(uri)
        self._uri = f"s3://{self._bucket}/{self._key}" if self._key else f"s3://{self._bucket}"

    def _object_key(self, name: str) -> str:
        return f"{self._key}/{name}" if self._key else name

    def _object_uri(self, name: str) -> str:
        return f"s3://{self._bucket}/{self._object_key(name)}"

    def _new_folder(self) -> str:
        folder = tempfile.mkdtemp(prefix="smdist-s3-ckpt-", dir=self._staging_dir)
        self._folders.add(folder)
        return folder

    def _drop_folder(self, folder: str) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        self._folders.discard(folder)

    def _s3(self, action: str, call: Callable[[Any], _T]) -> _T:
        """Run one S3 call; its failure names the checkpoint URI, what was being done and how to fix it."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return call(_client(self._region))
        except ClientError as err:
            raise self._explain(action, err) from err
        except BotoCoreError as err:
            raise RuntimeError(f"S3 checkpoint {self._uri}: {action} failed: {err}") from err

    def _explain(self, action: str, err: BaseException) -> Exception:
        code = _error_code(err)
        if code == "NoSuchBucket" or (code in ("404", "NotFound") and action == "check bucket"):
            return FileNotFoundError(f"S3 checkpoint {self._uri}: bucket {self._bucket!r} does not exist (endpoint "
                                     f"{s3_endpoint() or 'AWS'}); create it or fix the checkpoint_id")
        if code in ("403", "AccessDenied", "Forbidden"):
            return PermissionError(f"S3 checkpoint {self._uri}: access denied to {action}; give the job's "
                                   "credentials s3:GetObject/PutObject/DeleteObject/ListBucket on that prefix")
        return RuntimeError(f"S3 checkpoint {self._uri}: {action} failed: {err}")

    def _check_bucket(self) -> None:
        self._s3("check bucket", lambda c: c.head_bucket(Bucket=self._bucket))

    def _exists(self, name: str) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        action = f"look up {self._object_uri(name)}"
        try:
            _client(self._region).head_object(Bucket=self._bucket, Key=self._object_key(name))
            return True
        except ClientError as err:
            if _error_code(err) in ("404", "NoSuchKey", "NotFound"):
                return False
            raise self._explain(action, err) from err
        except BotoCoreError as err:
            raise RuntimeError(f"S3 checkpoint {self._uri}: {action} failed: {err}") from err


class S3FileSystemWriter(_S3Prefix, FileSystemWriter):
    """DCP ``StorageWriter`` for ``s3://bucket/prefix``: DCP's file format, staged locally, uploaded per rank.

    Keyword arguments: FileSystemWriter's (``thread_count``, ``single_file_per_rank``, ``sync_files``,
    ``per_thread_copy_ahead``, ``cache_staged_state_dict``, ``overwrite``), ``region`` (bucket region; default
    AWS_REGION), ``staging_dir`` (where the local copy is staged; default the temp dir); others are ignored."""

    def __init__(self, path: str, region: str | None = None, staging_dir: str | None = None, **kw: Any) -> None:
        _S3Prefix.__init__(self, path, region, staging_dir)
        options = {name: kw[name] for name in _WRITER_OPTIONS if name in kw}
        # The staging folder is made per save (prepare_local_plan); until then the path is a placeholder.
        FileSystemWriter.__init__(self, self._uri, **options)
        self._is_coordinator = True
        self._uploaded: set[str] = set()

    def reset(self, checkpoint_id: Any = None) -> None:
        if checkpoint_id:
            self._set_uri(checkpoint_id)
        FileSystemWriter.reset(self)

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        FileSystemWriter.set_up_storage_writer(self, is_coordinator, *args, **kwargs)
        self._is_coordinator = is_coordinator

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        self._check_bucket()
        if not self.overwrite and self._exists(_METADATA):
            raise FileExistsError(f"S3 checkpoint {self._uri} already exists ({self._object_uri(_METADATA)}) and "
                                  "overwrite=False; pick a new checkpoint_id or pass overwrite=True")
        self.path = Path(self._new_folder())
        return FileSystemWriter.prepare_local_plan(self, plan)

    def prepare_global_plan(self, plans: list[SavePlan]) -> list[SavePlan]:
        # Coordinator only, before any rank writes: an old .metadata would make a half-written prefix look complete.
        if self._exists(_METADATA):
            self._s3(f"remove the old {self._object_uri(_METADATA)}",
                     lambda c: c.delete_object(Bucket=self._bucket, Key=self._object_key(_METADATA)))
        return FileSystemWriter.prepare_global_plan(self, plans)

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future:
        folder = str(self.path)
        results = FileSystemWriter.write_data(self, plan, planner).wait()
        uploaded = self._upload_new(folder, set())
        # finish (the coordinator's; every rank's without collectives) uploads the metadata, then drops the folder
        if self._is_coordinator or not getattr(self, "use_collectives", True):
            self._uploaded = uploaded
        else:
            self._drop_folder(folder)
        done: Future = Future()
        done.set_result(results)
        return done

    def finish(self, metadata: Metadata, results: list) -> None:
        folder = str(self.path)
        try:
            FileSystemWriter.finish(self, metadata, results)
            self._upload_new(folder, self._uploaded)
        finally:
            self._drop_folder(folder)

    def _upload_new(self, folder: str, done: set[str]) -> set[str]:
        """Upload every file in ``folder`` not uploaded yet (this rank's shards; then .metadata); names -> done."""
        for entry in sorted(Path(folder).iterdir()):
            if entry.is_file() and entry.name not in done and not entry.name.endswith(".tmp"):
                target = self._object_key(entry.name)
                def upload(c: Any, src: str = str(entry), key: str = target) -> None:
                    c.upload_file(src, self._bucket, key)

                self._s3(f"upload {self._object_uri(entry.name)}", upload)
                done.add(entry.name)
        return done


class S3FileSystemReader(_S3Prefix, FileSystemReader):
    """DCP ``StorageReader`` for ``s3://bucket/prefix``: downloads ``.metadata`` and the files this rank reads.

    Made (or reset to a new id) only for a checkpoint that exists: a missing bucket or ``.metadata`` raises
    FileNotFoundError at once, because torch 2.11's ``load`` swallows read_metadata's errors into "metadata is None".
    Keyword arguments: ``region``, ``staging_dir`` (where downloads are kept during the load); others are ignored."""

    def __init__(self, path: str, region: str | None = None, staging_dir: str | None = None, **_: Any) -> None:
        _S3Prefix.__init__(self, path, region, staging_dir)
        FileSystemReader.__init__(self, self._uri)
        self._folder: str | None = None
        self._check_checkpoint()

    def _check_checkpoint(self) -> None:
        self._check_bucket()
        # Rank-local metadata (DCP without collectives) is the alternative; rank 0's stands for all, as in DCP.
        if not self._exists(_METADATA) and not self._exists(f"__0{_METADATA}"):
            raise FileNotFoundError(self._missing(_METADATA))

    def _missing(self, name: str) -> str:
        return (f"no DCP checkpoint at {self._uri}: {self._object_uri(name)} does not exist (never saved there, or "
                "the save did not finish); check the checkpoint_id")

    def reset(self, checkpoint_id: Any = None) -> None:
        self._release()
        FileSystemReader.reset(self)
        if checkpoint_id and parse_s3_uri(checkpoint_id) != (self._bucket, self._key):
            self._set_uri(checkpoint_id)
            self._check_checkpoint()

    def _local(self) -> str:
        if self._folder is None:
            self._folder = self._new_folder()
            self.path = Path(self._folder)
        return self._folder

    def _release(self) -> None:
        if self._folder is not None:
            self._drop_folder(self._folder)
            self._folder = None

    def _download(self, name: str) -> None:
        target = Path(self._local()) / name
        if target.exists():
            return
        part = target.with_name(target.name + ".part")  # a failed download never leaves a file that looks whole
        self._s3(f"download {self._object_uri(name)}",
                 lambda c: c.download_file(self._bucket, self._object_key(name), str(part)))
        part.rename(target)

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        rank = kwargs.get("rank")
        name = _METADATA if rank is None else f"__{rank}{_METADATA}"
        if not (Path(self._local()) / name).exists():
            self._check_bucket()
            if not self._exists(name):
                raise FileNotFoundError(self._missing(name))
            self._download(name)
        return FileSystemReader.read_metadata(self, *args, **kwargs)

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future:
        try:
            found = {getattr(self.storage_data[item.storage_index], "relative_path", None) for item in plan.items}
            # None: a metadata layout without file names: fetch the whole prefix
            names = set(self._list_files()) if None in found else {n for n in found if n is not None}
            for name in sorted(names):
                self._download(name)
            return FileSystemReader.read_data(self, plan, planner)
        finally:
            self._release()

    def _list_files(self) -> list[str]:
        prefix = self._object_key("")
        pages = self._s3(f"list {self._uri}/", lambda c: list(
            c.get_paginator("list_objects_v2").paginate(Bucket=self._bucket, Prefix=prefix)))
        keys = [obj["Key"][len(prefix):] for page in pages for obj in page.get("Contents", [])]
        return [name for name in keys if name and "/" not in name]
