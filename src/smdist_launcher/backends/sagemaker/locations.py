"""Where a SageMaker job's pieces live in AWS: role ARN, default bucket, output path, code archive. Pure."""
from __future__ import annotations

from urllib.parse import urlparse

SUBMIT_ARCHIVE = "sourcedir.tar.gz"


def role_arn(role: str, account: str, partition: str = "aws") -> str:
    """A role name becomes `arn:<partition>:iam::<account>:role/<name>` (roles under a path need the full ARN)."""
    return role if role.startswith("arn:") else f"arn:{partition}:iam::{account}:role/{role}"


def default_bucket(region: str, account: str) -> str:
    """The SageMaker SDK's default bucket name."""
    return f"sagemaker-{region}-{account}"


def split_s3(uri: str) -> tuple[str, str]:
    """`s3://bucket/a/b` → ("bucket", "a/b")."""
    parsed = urlparse(uri)
    return parsed.netloc, parsed.path.strip("/")


def output_path(explicit: str | None, bucket: str) -> str:
    return explicit if explicit else f"s3://{bucket}/"


def submit_uri(job_name: str, *, code_location: str | None, output: str) -> str:
    """`s3://<bucket>[/<code_location prefix>]/<job>/source/sourcedir.tar.gz`.

    Like the SDK: code_location's bucket and prefix if given, else the output path's bucket (without its prefix)."""
    bucket, prefix = split_s3(code_location) if code_location else (split_s3(output)[0], "")
    key = "/".join(p for p in (prefix, job_name, "source", SUBMIT_ARCHIVE) if p)
    return f"s3://{bucket}/{key}"
