"""boto3 clients of one region, the caller's account, and the default bucket. boto3 is imported lazily.

Endpoints: boto3 itself honours AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_<SERVICE>; S3 also takes local mode's
$SMDIST_S3_ENDPOINT_URL, so one setting points both backends at MinIO or a moto server."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ...errors import AwsSetupError, ValidationError
from ...jobspec.error_items import item
from ..storage.s3 import ENDPOINT_ENVS


def _boto3() -> Any:
    try:
        import boto3  # lazy: `import smdist_launcher` must stay light
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("running on SageMaker needs boto3: pip install 'smdist-launcher[aws]'") from exc
    return boto3


def resolve_region(explicit: str | None) -> str:
    """estimator region, else $AWS_REGION / $AWS_DEFAULT_REGION, else the AWS config profile. Reads no network."""
    region = explicit or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        region = _boto3().session.Session().region_name
    if not region:
        raise AwsSetupError([item("region", "no AWS region: pass region='us-west-2' to the estimator, set "
                                            "AWS_DEFAULT_REGION, or configure one with `aws configure`")])
    return region


DEFAULT_RETRY_MODE = "adaptive"   # standard retries plus client-side rate limiting: polling many jobs stays polite
DEFAULT_MAX_ATTEMPTS = 10


def retry_config() -> Any:
    """botocore's retry modes for throttling and transient errors; AWS_RETRY_MODE / AWS_MAX_ATTEMPTS (or the
    profile's retry_mode / max_attempts) win when set, since an explicit Config would override them."""
    from botocore.config import Config

    retries: dict[str, Any] = {}
    if not os.environ.get("AWS_RETRY_MODE"):
        retries["mode"] = DEFAULT_RETRY_MODE
    if not os.environ.get("AWS_MAX_ATTEMPTS"):
        retries["total_max_attempts"] = DEFAULT_MAX_ATTEMPTS
    return Config(retries=retries) if retries else Config()


@dataclass
class AwsClients:
    region: str
    _cache: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        if service not in self._cache:
            kwargs: dict[str, Any] = {"region_name": self.region}
            if service == "s3":
                endpoint = next((os.environ[e] for e in ENDPOINT_ENVS if os.environ.get(e)), None)
                if endpoint:
                    kwargs["endpoint_url"] = endpoint
            kwargs["config"] = retry_config()
            self._cache[service] = _boto3().client(service, **kwargs)
        return self._cache[service]

    @property
    def sagemaker(self) -> Any:
        return self.client("sagemaker")

    @property
    def s3(self) -> Any:
        return self.client("s3")

    @property
    def logs(self) -> Any:
        return self.client("logs")

    def caller(self) -> tuple[str, str]:
        """(account id, partition) of the credentials in use. The first call that needs credentials: a machine
        without usable ones gets one line saying what to set (AwsSetupError), not botocore's traceback."""
        from botocore.exceptions import ClientError, NoCredentialsError, PartialCredentialsError, TokenRetrievalError

        try:
            identity = self.client("sts").get_caller_identity()
        except (NoCredentialsError, PartialCredentialsError) as exc:
            raise AwsSetupError([item("credentials", f"{_what(exc)}; {_HOW_TO_SET}")]) from None
        except TokenRetrievalError as exc:  # an expired SSO session
            raise AwsSetupError([item("credentials", f"{_what(exc)}; run `aws sso login` and try again")]) from None
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in _REJECTED:
                raise AwsSetupError([item("credentials", f"AWS rejected the credentials in use ({code}); "
                                                         f"refresh or replace them: {_HOW_TO_SET}")]) from None
            raise
        return identity["Account"], identity["Arn"].split(":")[1]


_HOW_TO_SET = ("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones), or "
               "AWS_PROFILE, or run `aws configure` / `aws sso login`; to run on this machine instead, use "
               "instance_type='local'")
_REJECTED = ("ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId", "SignatureDoesNotMatch",
             "UnrecognizedClientException")


def _what(exc: Exception) -> str:
    text = str(exc).rstrip(".")
    return text[:1].lower() + text[1:] if text else "no AWS credentials found"


def bucket_exists(s3: Any, bucket: str) -> bool:
    """False only when S3 says it does not exist (no permission to look is not an answer: True)."""
    from botocore.exceptions import ClientError

    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchBucket", "NotFound"):
            return False
        if exc.response.get("Error", {}).get("Code") not in ("403", "AccessDenied"):
            raise
    return True


def check_buckets(s3: Any, buckets: dict[str, str]) -> None:
    """{argument name: bucket}: a ValidationError naming each argument whose bucket does not exist
    (before any upload)."""
    missing = [item(name, f"bucket {bucket!r} does not exist; create it or choose another bucket", bucket)
               for name, bucket in buckets.items() if not bucket_exists(s3, bucket)]
    if missing:
        raise ValidationError(missing)


def ensure_bucket(s3: Any, bucket: str, region: str) -> None:
    """Create the default bucket if it does not exist (the SDK does the same for sagemaker-<region>-<account>)."""
    if bucket_exists(s3, bucket):
        return
    config = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    s3.create_bucket(Bucket=bucket, **config)
