"""Who may call `smdist serve`: AWS Signature Version 4 on every request, checked the way SageMaker checks it, and
requests only for serve's own address (no DNS rebinding).

The key pair serve accepts is made at start (or given through SMDIST_SERVE_ACCESS_KEY_ID /
SMDIST_SERVE_SECRET_ACCESS_KEY) and written as a named profile into the serving user's shared credentials file
(credentials_file.py), so boto3 and the SageMaker SDK sign with it unchanged (AWS_PROFILE=...). The signature is
recomputed with botocore's own SigV4 signer over the request as received (signed headers only): no crypto of our own.
What the headers decide (key id, date, scope, signed names) is checked before the body is read
(authenticate_headers), the signature over the body after (verify_body)."""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from .protocol import ApiError

ACCESS_KEY_ENV = "SMDIST_SERVE_ACCESS_KEY_ID"
SECRET_KEY_ENV = "SMDIST_SERVE_SECRET_ACCESS_KEY"
DEFAULT_PROFILE = "smdist-serve"
KEY_PREFIX = "SMDS"  # of the key ids serve makes: a profile holding another id is the user's, never overwritten
MAX_SKEW = timedelta(minutes=15)  # AWS's allowed clock skew for SigV4
SIGV4_TIMESTAMP = "%Y%m%dT%H%M%SZ"
# The X-Amz-Target prefix → the signing name the credential scope must carry.
SIGNING_NAMES = {"SageMaker": "sagemaker", "Logs_20140328": "logs", "GraniteServiceVersion20100801": "monitoring"}

# AWS's own error codes and messages for JSON-protocol services (400, as SageMaker and CloudWatch Logs answer).
_MISSING = ("MissingAuthenticationTokenException", "Missing Authentication Token")
_UNKNOWN_KEY = ("UnrecognizedClientException", "The security token included in the request is invalid.")
_MISMATCH = ("InvalidSignatureException", "The request signature we calculated does not match the signature you "
             "provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for "
             "details.")
_AUTH_FIELDS = re.compile(r"(\w+)=([^,\s]*)")


@dataclass(frozen=True)
class KeyPair:
    access_key: str
    secret_key: str


def new_key_pair() -> KeyPair:
    """A fresh random pair, shaped like AWS's (20-character id, 40-character secret) from the `secrets` module."""
    alphabet = string.ascii_uppercase + "234567"
    access = KEY_PREFIX + "".join(secrets.choice(alphabet) for _ in range(16))
    secret = "".join(secrets.choice(string.ascii_letters + string.digits + "+/") for _ in range(40))
    return KeyPair(access, secret)


def key_pair_from(environ: Mapping[str, str]) -> KeyPair | None:
    """The pair the user gave in the environment (never in argv: other users see argv), else None."""
    access, secret = environ.get(ACCESS_KEY_ENV, ""), environ.get(SECRET_KEY_ENV, "")
    if bool(access) != bool(secret):
        raise ValueError(f"give both {ACCESS_KEY_ENV} and {SECRET_KEY_ENV}, or neither (serve then makes a pair)")
    return KeyPair(access, secret) if access else None


# ---- requests ----------------------------------------------------------------------------------------------------
_HOST = re.compile(r"\[(?P<v6>[0-9a-f:.]+)\](?::[0-9]{1,5})?"     # [v6] or [v6]:port
                   r"|(?P<name>[^:\[\]@/\s]+)(?::[0-9]{1,5})?"  # name or name:port
                   r"|(?P<bare>[0-9a-f:.]+)")                     # a bare v6 address


def host_name(header: str) -> str:
    """The name in a Host header, lower case, without port or IPv6 brackets; "" for anything else (`a:80@b`,
    `name:text`, `[::1]junk`: no browser sends these, and none names this serve)."""
    found = _HOST.fullmatch(header.strip().lower())
    if found is None:
        return ""
    return found.group("v6") or found.group("name") or found.group("bare")


def own_host_names(bind: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The Host names a request for this serve may carry: loopback names, the bound address, and for a serve that
    listens beyond loopback this machine's names and the names given with --allowed-host (a TLS proxy's name)."""
    import ipaddress
    import socket

    names = {"localhost", "127.0.0.1", "::1", host_name(bind)}
    try:
        loopback = ipaddress.ip_address(bind).is_loopback
    except ValueError:
        loopback = bind == "localhost"
    if not loopback:
        names.update(n.lower() for n in (socket.gethostname(), socket.getfqdn()) if n)
    names.update(host_name(n) for n in extra)
    return frozenset(n for n in names if n and n not in ("0.0.0.0", "::"))


def check_host(header: str | None, allowed: frozenset[str], local_address: str) -> None:
    """AccessDeniedException unless the Host header names this serve. `local_address` (the address the client
    reached) counts too, so a serve on 0.0.0.0 answers clients that use any of this machine's addresses; a web page
    whose own name was rebound to this machine carries that name, never one of these."""
    name = host_name(header or "")
    if name in allowed or (name and name == host_name(local_address)):
        return
    raise ApiError("AccessDeniedException", f"Host {header!r} is not this endpoint's address; requests for other "
                                            "names are refused (DNS rebinding). Use the endpoint's own address or "
                                            "start serve with --allowed-host NAME", 403)


def _parse_authorization(value: str) -> tuple[str, list[str], list[str], str]:
    """(access key, scope [date, region, service, 'aws4_request'], signed headers, signature) of an Authorization
    header; IncompleteSignatureException when it is not a SigV4 header."""
    algorithm, _, rest = value.strip().partition(" ")
    fields = dict(_AUTH_FIELDS.findall(rest))
    missing = [k for k in ("Credential", "SignedHeaders", "Signature") if not fields.get(k)]
    if algorithm != "AWS4-HMAC-SHA256" or missing:
        raise ApiError("IncompleteSignatureException",
                       f"Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters with "
                       f"algorithm AWS4-HMAC-SHA256 (missing or wrong: {', '.join(missing) or algorithm}). "
                       f"Authorization={value[:80]}")
    access, *scope = fields["Credential"].split("/")
    if len(scope) != 4 or scope[3] != "aws4_request":
        raise ApiError("IncompleteSignatureException", f"Credential {fields['Credential']!r} is not "
                                                       "<key>/<date>/<region>/<service>/aws4_request")
    return access, scope, fields["SignedHeaders"].lower().split(";"), fields["Signature"]


@dataclass(frozen=True)
class SignedRequest:
    """What the headers of a request established before its body was read: the signature to check over the body."""

    method: str
    path: str
    received: dict[str, str]  # the signed headers as they arrived
    stamp: str                # X-Amz-Date
    region: str
    service: str
    signature: str
    declared_hash: str | None  # X-Amz-Content-SHA256, signed or not: the body must match it


def authenticate_headers(method: str, path: str, headers: Mapping[str, str] | Any, keys: KeyPair, *,
                         region: str | None = None, now: datetime | None = None) -> SignedRequest:
    """Everything of the signature that the headers alone decide, so that a body is read only for a caller that holds
    serve's key id, a fresh date and the right scope (botocore signs the payload hash but sends it only for S3).
    Where the client did send X-Amz-Content-SHA256, the whole signature is checked here, over that declared hash.

    `headers` is the received header mapping (http.server's message: case-insensitive, get_all for repeats)."""
    authorization = headers.get("Authorization")
    if not authorization:
        raise ApiError(*_MISSING)
    access, (day, scope_region, service, _), signed, signature = _parse_authorization(authorization)
    if not hmac.compare_digest(access.encode(), keys.access_key.encode()):
        raise ApiError(*_UNKNOWN_KEY)
    for needed in ("host", "x-amz-date") + (("x-amz-target",) if headers.get("X-Amz-Target") else ()):
        if needed not in signed:  # unsigned, these could be changed in flight: host, replay window, operation
            raise ApiError("IncompleteSignatureException", f"the signed headers must include {needed}")
    stamp = headers.get("X-Amz-Date") or ""
    try:
        when = datetime.strptime(stamp, SIGV4_TIMESTAMP).replace(tzinfo=timezone.utc)
    except ValueError:
        raise ApiError("IncompleteSignatureException", f"X-Amz-Date {stamp!r} is not YYYYMMDDTHHMMSSZ") from None
    now = now or datetime.now(timezone.utc)
    fmt = lambda t: t.strftime(SIGV4_TIMESTAMP)  # noqa: E731 - AWS's wording quotes these
    if when < now - MAX_SKEW:
        raise ApiError("InvalidSignatureException", f"Signature expired: {stamp} is now earlier than "
                                                    f"{fmt(now - MAX_SKEW)} ({fmt(now)} - 15 min.)")
    if when > now + MAX_SKEW:
        raise ApiError("InvalidSignatureException", f"Signature not yet current: {stamp} is still later than "
                                                    f"{fmt(now + MAX_SKEW)} ({fmt(now)} + 15 min.)")
    if day != stamp[:8]:
        raise ApiError(*_MISMATCH)
    if region is not None and scope_region != region:  # AWS's answer to a request signed for another region
        raise ApiError("InvalidSignatureException", f"Credential should be scoped to a valid region, not "
                                                    f"'{scope_region}'. ")
    target = headers.get("X-Amz-Target") or ""
    expected_service = SIGNING_NAMES.get(target.partition(".")[0])
    if expected_service and service != expected_service:
        raise ApiError("InvalidSignatureException", f"Credential should be scoped to correct service: "
                                                    f"'{expected_service}'.")
    # The request as the client signed it: only the headers it signed.
    received = {name: ",".join(headers.get_all(name) if hasattr(headers, "get_all") else [headers[name]])
                for name in signed if headers.get(name) is not None}
    if len(received) != len(signed):
        raise ApiError(*_MISMATCH)  # a signed header that did not arrive
    request = SignedRequest(method, path, received, stamp, scope_region, service, signature,
                            headers.get("X-Amz-Content-SHA256"))
    if "x-amz-content-sha256" in received:  # the signed payload hash is in the headers: check before the body
        _check_signature(request, None, keys)
    return request


def verify_body(request: SignedRequest, body: bytes, keys: KeyPair) -> None:
    """The rest of the check once the body is read: its hash (declared or not) is the one that was signed."""
    declared = request.declared_hash
    if declared is not None and declared != hashlib.sha256(body).hexdigest():
        # botocore takes a declared payload hash as is: check it against the body actually received
        raise ApiError(*_MISMATCH)
    _check_signature(request, body, keys)



def _check_signature(request: SignedRequest, body: bytes | None, keys: KeyPair) -> None:
    """Recompute the signature with botocore's own SigV4 signer (None: the body is not read yet, the declared
    X-Amz-Content-SHA256 stands for it, as botocore's canonical request takes it)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    aws = AWSRequest(method=request.method, url=f"http://{request.received['host']}{request.path}",
                     data=body or b"", headers=request.received)
    aws.context["timestamp"] = request.stamp
    signer = SigV4Auth(Credentials(keys.access_key, keys.secret_key), request.service, request.region)
    # add_auth would stamp the current time; its steps with the request's own time give the signature to compare.
    expected = signer.signature(signer.string_to_sign(aws, signer.canonical_request(aws)), aws)
    if not hmac.compare_digest(expected.encode(), request.signature.encode()):
        raise ApiError(*_MISMATCH)
