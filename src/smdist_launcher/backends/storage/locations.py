"""Where data comes from and goes to: `s3://bucket/key`, `file:///path` or a plain local path."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse


@dataclass(frozen=True)
class Location:
    uri: str
    bucket: str | None = None   # s3 only
    key: str = ""               # s3 only: no leading slash
    path: Path | None = None    # local only: absolute

    @property
    def is_s3(self) -> bool:
        return self.bucket is not None

    def child(self, *parts: str) -> Location:
        if self.is_s3:
            key = "/".join(p.strip("/") for p in (self.key, *parts) if p.strip("/"))
            return Location(f"s3://{self.bucket}/{key}", bucket=self.bucket, key=key)
        assert self.path is not None
        path = self.path.joinpath(*parts)
        return Location(path.as_uri(), path=path)


def parse_location(uri: str, *, field: str = "uri") -> Location:
    """Parse an s3://, file:// or local path location; `field` names the key path in errors."""
    if uri.startswith("s3://"):
        parsed = urlparse(uri)
        if not parsed.netloc:
            raise ValueError(f"{field}: {uri!r} has no bucket; write s3://<bucket>/<prefix>")
        return Location(uri, bucket=parsed.netloc, key=parsed.path.lstrip("/"))
    if uri.startswith("file://"):
        # file://data/train is the relative path data/train (SageMaker's local mode reads it so), not host "data"
        parsed = urlparse(uri)
        host = "" if parsed.netloc == "localhost" else parsed.netloc
        path = Path(unquote(host + parsed.path))
    elif "://" in uri:
        raise ValueError(f"{field}: {uri!r} has an unsupported scheme; use s3://, file:// or a local path")
    else:
        path = Path(os.path.expanduser(uri))
    path = path.absolute()
    return Location(path.as_uri(), path=path)
