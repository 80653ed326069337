"""Turn a launcher's output stream into (global rank or None, line) pairs.

torchrun: we set TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE so every rank line starts `[r<global rank>]:`.
mpirun --tag-output: `[jobid,rank]<stdout>:` tags appear at the start of every chunk, also mid-line when two
ranks' writes interleave, so text is reassembled per rank."""
from __future__ import annotations

import re
from typing import Protocol

TORCHRUN_PREFIX_TEMPLATE = "[r${rank}]:"
_TORCHRUN_LINE = re.compile(r"^\[r(\d+)\]:(.*)$", re.S)
_MPI_TAG = re.compile(r"\[\d+,(\d+)\]<(?:stdout|stderr|stddiag)>:")
_MAX_TAG = 40  # longest tag we may have to wait for across two reads


class LineSplitter(Protocol):
    def feed(self, text: str) -> list[tuple[int | None, str]]: ...

    def flush(self) -> list[tuple[int | None, str]]: ...


class _Lines:
    def __init__(self) -> None:
        self._buf = ""

    def _complete(self, text: str) -> list[str]:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        return lines

    def _rest(self) -> list[str]:
        rest, self._buf = self._buf, ""
        return [rest] if rest else []


class FixedRankLines(_Lines):
    """A plain `python train.py`: every line is the host's only rank."""

    def __init__(self, rank: int | None) -> None:
        super().__init__()
        self.rank = rank

    def feed(self, text: str) -> list[tuple[int | None, str]]:
        return [(self.rank, line) for line in self._complete(text)]

    def flush(self) -> list[tuple[int | None, str]]:
        return [(self.rank, line) for line in self._rest()]


class TorchrunLines(_Lines):
    def _parse(self, line: str) -> tuple[int | None, str]:
        m = _TORCHRUN_LINE.match(line)
        return (int(m.group(1)), m.group(2)) if m else (None, line)

    def feed(self, text: str) -> list[tuple[int | None, str]]:
        return [self._parse(line) for line in self._complete(text)]

    def flush(self) -> list[tuple[int | None, str]]:
        return [self._parse(line) for line in self._rest()]


class MpiTagLines:
    def __init__(self) -> None:
        self._pending = ""
        self._owner: int | None = None
        self._partial: dict[int | None, str] = {}

    def _emit(self, owner: int | None, text: str, out: list[tuple[int | None, str]]) -> None:
        pieces = text.split("\n")
        for piece in pieces[:-1]:
            out.append((owner, self._partial.pop(owner, "") + piece))
            owner = None  # mpirun tags every line, so a newline ends the rank's segment
        if pieces[-1]:
            self._partial[owner] = self._partial.get(owner, "") + pieces[-1]
        self._owner = owner

    def feed(self, text: str) -> list[tuple[int | None, str]]:
        text = self._pending + text
        self._pending = ""
        cut = text.rfind("[")
        if cut != -1 and len(text) - cut < _MAX_TAG and "\n" not in text[cut:] and not _MPI_TAG.match(text, cut):
            text, self._pending = text[:cut], text[cut:]  # maybe a tag cut in half: wait for the rest
        out: list[tuple[int | None, str]] = []
        pos = 0
        for m in _MPI_TAG.finditer(text):
            self._emit(self._owner, text[pos:m.start()], out)
            self._owner = int(m.group(1))
            pos = m.end()
        self._emit(self._owner, text[pos:], out)
        return out

    def flush(self) -> list[tuple[int | None, str]]:
        out = self.feed("")
        if self._pending:
            self._emit(self._owner, self._pending, out)
            self._pending = ""
        out += [(owner, text) for owner, text in self._partial.items() if text]
        self._partial.clear()
        return out
