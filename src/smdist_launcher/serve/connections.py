"""What one client can hold of serve: a slot among a fixed number of connections, a deadline and a byte budget for
each part of a request it sends.

A connection that is still sending (or has not started) a request's headers holds its slot only until a newer one
needs it: when every slot is taken, the connection that has waited longest for its headers is closed, one that never
carried a signed request before one that did (a key holder's kept-alive connection). So a flood of silent or
trickling connections cannot keep a caller with the key out, and one that sends a request at once is never the
oldest. A connection whose headers passed the signature checks (its body is being read, or its request handled) is
never evicted; when every slot holds one, a new connection is answered 503 and closed."""
from __future__ import annotations

import io
import socket
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 64           # slots, and the worker threads that serve them
    request_timeout_s: float = 20.0     # to send a request's headers (idle keep-alive included), then again its body
    max_header_bytes: int = 64 * 2**10  # request line and headers together
    max_body_bytes: int = 2**20         # a CreateTrainingJob is a few KiB; nothing serve answers needs more
    write_timeout_s: float = 20.0       # a client that does not read its answer


DEFAULT_LIMITS = ConnectionLimits()


class OverLimit(OSError):
    """A request that went over its byte budget: its connection is closed without an answer."""


class DeadlineReader(io.RawIOBase):
    """A socket's read side with a deadline and a byte budget for the current part of a request: a client that
    trickles bytes is cut off at the deadline however often it sends, and one that sends too much at the budget."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = 0.0
        self._budget = 0

    def arm(self, seconds: float, budget: int) -> None:
        self._deadline = time.monotonic() + seconds
        self._budget = budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        if self._budget <= 0:
            raise OverLimit("the request is larger than serve reads")
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the client did not send its request in time")
        self._sock.settimeout(left)
        n = self._sock.recv_into(memoryview(buffer)[: self._budget])
        self._budget -= n
        return n


@dataclass
class _Slot:
    waiting: bool          # for a request's headers: may be evicted
    since: float
    proven: bool = False   # has carried a request signed with serve's key: evicted after the others


class Admission:
    """The connection slots: taken at accept, handed to the longest-waiting connection's successor when full."""

    def __init__(self, slots: int) -> None:
        self._slots = slots
        self._held: dict[socket.socket, _Slot] = {}
        self._lock = threading.Lock()

    def admit(self, sock: socket.socket) -> bool:
        """Whether `sock` gets a slot (evicting the connection that has waited longest for its headers if need be)."""
        with self._lock:
            if len(self._held) >= self._slots:
                waiting = [(slot.proven, slot.since, victim) for victim, slot in self._held.items() if slot.waiting]
                if not waiting:
                    return False
                victim = min(waiting, key=lambda entry: entry[:2])[2]
                del self._held[victim]
                try:  # its thread's read returns at once (end of stream); that thread closes the socket
                    victim.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._held[sock] = _Slot(waiting=True, since=time.monotonic())
            return True

    def wait_for_request(self, sock: socket.socket) -> bool:
        """`sock` waits for its next request (evictable from now); False if it was evicted. A new connection has
        waited since it was accepted, not since a worker thread got to it (threads start in no fixed order)."""
        with self._lock:
            slot = self._held.get(sock)
            if slot is None:
                return False
            if not slot.waiting:  # back from a request: kept alive, waiting from now
                slot.waiting, slot.since = True, time.monotonic()
            return True

    def start_work(self, sock: socket.socket) -> bool:
        """`sock` sent a request's headers (no longer evictable); False if it was evicted first."""
        with self._lock:
            slot = self._held.get(sock)
            if slot is None:
                return False
            slot.waiting = False
            return True

    def proven(self, sock: socket.socket) -> None:
        """`sock` carried a request signed with serve's key."""
        with self._lock:
            slot = self._held.get(sock)
            if slot is not None:
                slot.proven = True

    def release(self, sock: socket.socket) -> None:
        with self._lock:
            self._held.pop(sock, None)

    def close_all(self) -> None:
        """At exit: every held connection's thread returns from its read."""
        with self._lock:
            for sock in self._held:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._held.clear()
