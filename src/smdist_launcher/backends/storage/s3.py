"""boto3 S3 calls of the backends (channel downloads, output, checkpoint and code uploads).

The endpoint comes from $SMDIST_S3_ENDPOINT_URL, $AWS_ENDPOINT_URL_S3 or $AWS_ENDPOINT_URL,
so tests (and MinIO/moto users) can point at a server on 127.0.0.1."""
from __future__ import annotations

import os
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from ...contract.s3_endpoint import ENDPOINT_ENVS, s3_endpoint, s3_region
from .locations import Location

__all__ = ["ENDPOINT_ENVS", "client"]


def client() -> Any:
    try:
        import boto3  # lazy: only jobs with s3:// locations need it
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("s3:// locations need boto3: pip install 'smdist-launcher[aws]'") from exc
    return boto3.client("s3", endpoint_url=s3_endpoint(), region_name=s3_region())


def safe_relative(name: str, uri: str) -> PurePosixPath:
    """An object key below a prefix as a relative path; keys that would escape the folder are refused."""
    rel = PurePosixPath(name)
    if rel.is_absolute() or any(part in ("..", "") for part in rel.parts) or not rel.parts:
        raise ValueError(f"refusing s3 object {uri!r}: its key would be written outside the channel folder")
    return rel


def list_objects(s3: Any, loc: Location) -> list[tuple[str, PurePosixPath]]:
    """(key, path relative to the prefix) of every object under the location, sorted by key.

    Like SageMaker's S3Prefix: an exact object gives its base name; else the prefix is a folder."""
    assert loc.bucket is not None
    if loc.key and not loc.key.endswith("/"):
        try:
            s3.head_object(Bucket=loc.bucket, Key=loc.key)
            return [(loc.key, safe_relative(PurePosixPath(loc.key).name, loc.uri))]
        except s3.exceptions.ClientError:
            pass
    prefix = loc.key if not loc.key or loc.key.endswith("/") else loc.key + "/"
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=loc.bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            key = obj["Key"]
            if key.endswith("/"):
                continue  # console-made "folder" markers
            out.append((key, safe_relative(key[len(prefix):], f"s3://{loc.bucket}/{key}")))
    return sorted(out)


CHUNK_BYTES = 1024 * 1024


def download(s3: Any, loc: Location, objects: list[tuple[str, PurePosixPath]], dest: Path) -> None:
    """Each object streamed in 1 MiB reads in the calling thread, into a temporary name renamed when complete.

    Not boto3's download_file: its transfer threads finish their parts before a Ctrl-C gets through (12 s on a
    large object); a read in this thread is interrupted at once and leaves no partial file under the final name."""
    for key, rel in objects:
        target = dest.joinpath(*rel.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        # Not derived from the object's name: a key segment of 247-255 bytes is a valid file name, but
        # ".<name>.partial" would pass the 255-byte file-name limit (ENAMETOOLONG) and fail the whole job.
        partial = target.with_name(f".smdist-{uuid.uuid4().hex}.partial")
        try:
            body = s3.get_object(Bucket=loc.bucket, Key=key)["Body"]
            with body, open(partial, "wb") as out:
                for chunk in body.iter_chunks(CHUNK_BYTES):
                    out.write(chunk)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)


def upload_file(s3: Any, path: Path, loc: Location) -> None:
    s3.upload_file(str(path), loc.bucket, loc.key)


def upload_tree(s3: Any, root: Path, loc: Location) -> int:
    count = 0
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
        upload_file(s3, path, loc.child(path.relative_to(root).as_posix()))
        count += 1
    return count
