"""What a client that holds no key can take of `smdist serve` (serve/server.py, serve/connections.py), through raw
sockets and real boto3 clients against real serve processes: an unauthenticated body is never read, a body over the
limit is refused unread, a trickling client is cut off, connections over the cap are closed (the longest-waiting one
first, a new one answered 503 when every slot holds a signed request), and the request line written to the operator's
terminal has its control characters escaped. No assertion on time: each test waits for the server's answer or close.
"""
from __future__ import annotations

import hashlib
import json
import select
import socket
import tempfile
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from .conftest import REGION, Served, running_serve

pytestmark = pytest.mark.timeout(300)

SAFETY_S = 120  # a socket that never answers fails the test after this, instead of hanging it (no timing asserted)


def _port(served: str) -> int:
    return int(served.rsplit(":", 1)[1])


def _keys(served: Served) -> Any:
    """serve's key pair, as a client reads it from the profile serve wrote."""
    from botocore.configloader import raw_config_parse
    from botocore.credentials import Credentials

    profile = raw_config_parse(served.client_env["AWS_SHARED_CREDENTIALS_FILE"])[served.client_env["AWS_PROFILE"]]
    return Credentials(profile["aws_access_key_id"], profile["aws_secret_access_key"])


def _signed_head(served: Served, target: str, body: bytes, *, signed: dict[str, str] | None = None,
                 credentials: Any = None, **extra: str) -> bytes:
    """The request line and headers of a POST signed with serve's key (the body's hash signed, as botocore does),
    with the `signed` headers signed too and the `extra` ones not."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    host = f"127.0.0.1:{_port(served)}"
    request = AWSRequest(method="POST", url=f"http://{host}/", data=body, headers={
        "X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.1", **(signed or {})})
    SigV4Auth(credentials or _keys(served), "sagemaker", REGION).add_auth(request)
    headers = {"Host": host, **dict(request.headers.items()), "Content-Length": str(len(body)), **extra}
    return ("POST / HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode()


def _connect(served: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", _port(served)), timeout=SAFETY_S)


def _until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk


def _answer(sock: socket.socket) -> tuple[int, bytes]:
    """One HTTP answer (status, body) read off `sock`."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(
        b"content-length:"))
    while len(body) < length:
        body += sock.recv(65536)
    return int(head.split(b" ", 2)[1]), body


def _unsigned_head(served: str, length: int) -> bytes:
    return (f"POST / HTTP/1.1\r\nHost: 127.0.0.1:{_port(served)}\r\nX-Amz-Target: SageMaker.CreateTrainingJob\r\n"
            f"Content-Type: application/x-amz-json-1.1\r\nContent-Length: {length}\r\n\r\n").encode()


def test_an_unauthenticated_body_is_never_read_and_signed_callers_are_answered_meanwhile(
        serve_endpoint: Served, clients: dict[str, Any]) -> None:
    trickling = _connect(serve_endpoint)
    trickling.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # its headers are still coming
    flooding = _connect(serve_endpoint)
    # a body of almost 1 MiB announced, 1 KiB of it sent: the answer comes without the rest, then the close
    flooding.sendall(_unsigned_head(serve_endpoint, 1_000_000) + b"{" + b" " * 1024)
    answer = _until_closed(flooding)
    assert answer.startswith(b"HTTP/1.1 400 ") and b"MissingAuthenticationTokenException" in answer, answer
    with pytest.raises(ClientError) as info:  # a signed caller on another connection is answered
        clients["sagemaker"].describe_training_job(TrainingJobName="no-such-job")
    assert info.value.response["Error"]["Code"] == "ValidationException"
    trickling.close()
    flooding.close()


def test_a_body_over_the_limit_is_refused_unread(serve_endpoint: Served) -> None:
    sock = _connect(serve_endpoint)
    body = b"{}"
    head = _signed_head(serve_endpoint, "SageMaker.ListTrainingJobs", body).replace(
        b"Content-Length: 2\r\n", b"Content-Length: 2097152\r\n")
    sock.sendall(head + body)
    answer = _until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 413 ") and b"at most 1048576 bytes" in answer, answer
    sock.close()


def test_a_declared_payload_hash_lets_the_whole_signature_be_checked_before_the_body(serve_endpoint: Served) -> None:
    from botocore.credentials import Credentials

    body = b"{}"
    declared = {"X-Amz-Content-SHA256": hashlib.sha256(body).hexdigest()}  # signed, as S3 clients send it
    wrong_secret = Credentials(_keys(serve_endpoint).access_key, "x" * 40)
    sock = _connect(serve_endpoint)
    sock.sendall(_signed_head(serve_endpoint, "SageMaker.ListTrainingJobs", body, signed=declared,
                              credentials=wrong_secret, Expect="100-continue"))
    answer = _until_closed(sock)  # refused without a "100 Continue": the body is never asked for
    assert answer.startswith(b"HTTP/1.1 400 ") and b"InvalidSignatureException" in answer, answer
    sock.close()
    sock = _connect(serve_endpoint)
    sock.sendall(_signed_head(serve_endpoint, "SageMaker.ListTrainingJobs", body, signed=declared,
                              Expect="100-continue"))
    assert _head_of_answer(sock, b"").startswith(b"HTTP/1.1 100 ")
    sock.sendall(body)
    assert _answer(sock)[0] == 200
    sock.close()


@pytest.fixture(scope="module")
def four_slots(moto_endpoint: str) -> Iterator[Served]:
    """A serve with 4 connection slots, shared: each test that uses it ends with _close_and_wait."""
    with tempfile.TemporaryDirectory(prefix="smdist-serve-slots-") as folder, \
            running_serve(moto_endpoint, Path(folder), "process", "--max-connections", "4") as served:
        yield served


def _head_of_answer(sock: socket.socket, request: bytes) -> bytes:
    """Send `request`; the status line and headers of the answer, b"" if the server closed instead."""
    data = b""
    try:
        sock.sendall(request)
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(1)
            if not chunk:
                return data
            data += chunk
    except (BrokenPipeError, ConnectionResetError):
        return data
    return data


def _close_and_wait(socks: list[socket.socket]) -> None:
    """Close each connection and read until serve has closed it too. serve frees a connection's slot before it closes
    it, and notices a client's close only when that connection's thread runs (late, on a loaded machine): a test
    that did not wait would leave the next one sharing the serve slots still held, kept-alive signed ones among them,
    and make its eviction order depend on when serve notices them."""
    for sock in socks:
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # serve closed it already
        _until_closed(sock)
        sock.close()


def test_connections_over_the_cap_are_closed(four_slots: Served) -> None:
    waiting = []
    for _ in range(4):  # every slot held by a connection still sending its headers
        sock = _connect(four_slots)
        sock.sendall(b"POST / HTTP/1.1\r\n")
        waiting.append(sock)
    # a signed caller gets the slot of the one that waited longest, which is closed
    caller = _connect(four_slots)
    body = b"{}"
    caller.sendall(_signed_head(four_slots, "SageMaker.ListTrainingJobs", body) + body)
    status, answer = _answer(caller)
    assert status == 200 and "TrainingJobSummaries" in json.loads(answer)
    assert _until_closed(waiting[0]) == b""
    # every slot held by a signed request whose body is on its way: those are never closed for a newcomer, who is
    # answered 503 and closed
    signed = _signed_head(four_slots, "SageMaker.ListTrainingJobs", body, Expect="100-continue")
    held = [caller, *waiting[1:]]
    for sock in held:  # the waiting ones go on with the request line they sent
        first = _head_of_answer(sock, signed if sock is caller else signed.split(b"\r\n", 1)[1])
        assert first.startswith(b"HTTP/1.1 100 "), first
    newcomer = _connect(four_slots)
    refused = _head_of_answer(newcomer, signed) + _until_closed(newcomer)
    assert refused.startswith(b"HTTP/1.1 503 ") and b"ServiceUnavailable" in refused, refused
    for sock in held:  # the held requests are answered once their bodies arrive
        sock.sendall(body)
        status, answer = _answer(sock)
        assert status == 200 and "TrainingJobSummaries" in json.loads(answer)
    _close_and_wait([caller, *waiting, newcomer])


def test_a_key_holders_kept_alive_connection_is_closed_after_the_others(four_slots: Served) -> None:
    body = b"{}"
    request = _signed_head(four_slots, "SageMaker.ListTrainingJobs", body) + body
    caller = _connect(four_slots)
    caller.sendall(request)
    assert _answer(caller)[0] == 200  # kept alive, now waiting for its next request: the oldest of those below
    waiting = []
    for _ in range(3):
        waiting.append(_connect(four_slots))
        waiting[-1].sendall(b"POST / HTTP/1.1\r\n")
    newcomer = _connect(four_slots)
    newcomer.sendall(request)
    assert _answer(newcomer)[0] == 200
    for sock in waiting[1:]:  # the younger ones still hold their slots (accept order, not worker order): they finish
        sock.sendall(request.split(b"\r\n", 1)[1])
        assert _answer(sock)[0] == 200
    assert _until_closed(waiting[0]) == b""  # the oldest that never carried a signed request made room
    caller.sendall(request)
    assert _answer(caller)[0] == 200
    _close_and_wait([caller, *waiting, newcomer])


def test_the_connection_accepted_first_has_waited_longest_whatever_thread_reaches_it_first() -> None:
    """Admission alone, over real sockets: worker threads reach new connections in no fixed order (under load, the
    second accepted before the first); the first is still the one evicted. It was stamped when its thread reached
    it: a younger one was closed instead, and the oldest held its slot until its header timeout."""
    from smdist_launcher.serve.connections import Admission

    pairs = [socket.socketpair() for _ in range(3)]
    first, second, third = (ours for ours, _ in pairs)
    try:
        admission = Admission(2)
        assert admission.admit(first) and admission.admit(second)
        assert admission.wait_for_request(second) and admission.wait_for_request(first)
        assert admission.admit(third)  # full: the longest-waiting connection makes room
        assert not admission.wait_for_request(first) and admission.wait_for_request(second)
    finally:
        for pair in pairs:
            for sock in pair:
                sock.close()


def _trickle_until_closed(sock: socket.socket, data: bytes) -> int:
    """Send `data` a byte at a time, a byte every 50 ms, until the server closes the connection; the bytes sent."""
    for sent, byte in enumerate(data):
        readable, _, _ = select.select([sock], [], [], 0.05)
        if readable:
            assert _until_closed(sock) == b"", "a cut-off client gets no answer"
            return sent
        try:
            sock.send(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            return sent
    return len(data)


def test_a_client_that_trickles_its_headers_or_body_is_cut_off(moto_endpoint: str, tmp_path: Path) -> None:
    with running_serve(moto_endpoint, tmp_path, "process", "--request-timeout", "1") as served:
        headers = b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 1000 + b"\r\n\r\n"
        sock = _connect(served)
        assert _trickle_until_closed(sock, headers) < len(headers)
        sock.close()
        body = b'{"NameContains": "' + b"a" * 1000 + b'"}'
        sock = _connect(served)
        sock.sendall(_signed_head(served, "SageMaker.ListTrainingJobs", body))
        assert _trickle_until_closed(sock, body) < len(body)
        sock.close()


def test_the_request_line_on_the_operators_terminal_is_escaped(serve_endpoint: Served) -> None:
    sock = _connect(serve_endpoint)
    # an ANSI "clear screen" (ESC [2J) and a C1 CSI (0x9b) in the path: http.server logs the request line
    sock.sendall(b"POST /\x1b[2J\x9b1Aforged HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
    status, _ = _answer(sock)
    sock.close()
    assert status == 400
    log = (serve_endpoint.jobs / "serve.log").read_text(errors="replace")
    line = next(line for line in log.split("\n") if "forged" in line)
    assert not [c for c in line if unicodedata.category(c) == "Cc"], repr(line)
    assert "POST /\\x1b[2J\\x9b1Aforged HTTP/1.1" in line, line


@pytest.mark.parametrize("lengths", [["0_2"], ["+2"], ["2", "0"], ["0", "2"]])
def test_a_content_length_other_than_one_plain_number_is_refused(serve_endpoint: Served, lengths: list[str]) -> None:
    """int() takes '0_2' and '+2'; two differing Content-Lengths are read one way here and another by a proxy in
    front (request smuggling): each is a 400, the body unread."""
    body = b"{}"
    head = _signed_head(serve_endpoint, "SageMaker.ListTrainingJobs", body).replace(
        b"Content-Length: 2\r\n", b"".join(f"Content-Length: {n}\r\n".encode() for n in lengths))
    sock = _connect(serve_endpoint)
    sock.sendall(head + body)
    answer = _until_closed(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 400 ") and b"Content-Length" in answer, answer


def test_an_empty_transfer_encoding_is_refused(serve_endpoint: Served) -> None:
    body = b"{}"
    sock = _connect(serve_endpoint)
    sock.sendall(_signed_head(serve_endpoint, "SageMaker.ListTrainingJobs", body, **{"Transfer-Encoding": ""}) + body)
    answer = _until_closed(sock)
    sock.close()
    assert answer.startswith(b"HTTP/1.1 411 "), answer


@pytest.mark.parametrize("body", [b"[" * 100_000 + b"]" * 100_000, b'{"NameContains": ' + b"[" * 500 + b"]" * 500
                                  + b"}"], ids=["past-the-parser", "past-validation"])
def test_a_deeply_nested_body_is_a_client_error(serve_endpoint: Served, body: bytes) -> None:
    """A signed JSON bomb within 1 MiB: json.loads (or a validator walking it) hits RecursionError: a 400, no 500."""
    sock = _connect(serve_endpoint)
    sock.sendall(_signed_head(serve_endpoint, "SageMaker.ListTrainingJobs", body) + body)
    status, answer = _answer(sock)
    sock.close()
    assert status == 400 and b"SerializationException" in answer, answer
