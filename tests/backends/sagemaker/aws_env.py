"""Point boto3 at the session's moto server (tests/backends/conftest.py) with fake credentials."""
from __future__ import annotations

import pytest

MOTO_ACCOUNT = "123456789012"  # moto's default account


def use_moto(monkeypatch: pytest.MonkeyPatch, endpoint: str, region: str = "us-east-1") -> None:
    for key, value in {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": region, "SMDIST_SAGEMAKER_POLL_S": "0.05"}.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_REGION", "AWS_SESSION_TOKEN", "SMDIST_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(key, raising=False)
