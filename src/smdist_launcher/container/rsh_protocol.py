"""Wire format between our rsh agent (run by mpirun on the master) and a host runtime's rsh server.

Request: one JSON line {"token", "host", "command"}. Reply: frames of 1 type byte + 4-byte big-endian length +
payload: b"O" output bytes, b"X" the exit code as a signed 4-byte int (last frame)."""
from __future__ import annotations

import json
import socket
import struct
from collections.abc import Iterator
from typing import Any

OUTPUT = b"O"
EXIT = b"X"
_HEADER = struct.Struct(">cI")
MAX_FRAME = 1 << 24  # the server sends output in chunks of 64 KiB


def send_request(sock: socket.socket, token: str, host: str, command: str) -> None:
    sock.sendall(json.dumps({"token": token, "host": host, "command": command}).encode() + b"\n")


def read_request(sock: socket.socket, limit: int = 1 << 20) -> dict[str, Any]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("rsh client closed the connection before sending its request")
        data += chunk
        if len(data) > limit:
            raise ValueError("rsh request too long")
    return json.loads(data)


def send_frame(sock: socket.socket, kind: bytes, payload: bytes) -> None:
    sock.sendall(_HEADER.pack(kind, len(payload)) + payload)


def send_exit(sock: socket.socket, code: int) -> None:
    send_frame(sock, EXIT, struct.pack(">i", code))


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("rsh server closed the connection")
        buf += chunk
    return buf


def read_frames(sock: socket.socket) -> Iterator[tuple[bytes, bytes]]:
    while True:
        kind, length = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
        if kind not in (OUTPUT, EXIT) or length > MAX_FRAME:
            raise ConnectionError(f"rsh server sent a malformed frame ({kind!r}, {length} bytes)")
        yield kind, _recv_exact(sock, length)
        if kind == EXIT:
            return


def exit_code(payload: bytes) -> int:
    return struct.unpack(">i", payload)[0]
