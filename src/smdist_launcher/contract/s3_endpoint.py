"""Which S3 endpoint every S3 call of the project uses (SDK backends and the in-host runtime alike; stdlib only).

A MinIO/moto user sets one of these; the first one set wins. Without any, boto3's own default (AWS)."""
from __future__ import annotations

import os
from collections.abc import Mapping

ENDPOINT_ENVS = ("SMDIST_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")


def s3_endpoint(environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    return next((env[e] for e in ENDPOINT_ENVS if env.get(e)), None)


def s3_region(environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
