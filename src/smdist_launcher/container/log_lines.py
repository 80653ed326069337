"""Turn a launcher's output stream into (global rank or None, line) pairs.

torchrun: we set TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE so every rank line starts `[r<global rank>]:`. Its tee reads
each rank's output file with readline(), so a line the rank had half written comes out alone, without its newline,
and the next rank's `[r0]:...` lands on the same line; the rest follows later under the first rank's tag again.
mpirun --tag-output: `[jobid,rank]<stdout>:` tags appear at the start of every chunk, also mid-line when two ranks'
writes interleave. Both are reassembled per rank (TaggedLines): otherwise the second rank's line is filed under the
first and the metrics on either line are misread (seen: 1 to 3 of 12,000 points lost in a chatty 2x2 job)."""
from __future__ import annotations

import re
from typing import Protocol

TORCHRUN_PREFIX_TEMPLATE = "[r${rank}]:"
_TORCHRUN_TAG = re.compile(r"\[r(\d+)\]:")
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


class TaggedLines:
    """A stream whose chunks start with a rank's tag (the tag regex's first group is the rank), anywhere in a line:
    text after a tag is that rank's until the next tag or newline; a rank's unfinished line waits for its rest."""

    def __init__(self, tag: re.Pattern[str]) -> None:
        self._tag = tag
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
        if cut != -1 and len(text) - cut < _MAX_TAG and "\n" not in text[cut:] and not self._tag.match(text, cut):
            text, self._pending = text[:cut], text[cut:]  # maybe a tag cut in half: wait for the rest
        out: list[tuple[int | None, str]] = []
        pos = 0
        for m in self._tag.finditer(text):
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


class TorchrunLines(TaggedLines):
    def __init__(self) -> None:
        super().__init__(_TORCHRUN_TAG)


class MpiTagLines(TaggedLines):
    def __init__(self) -> None:
        super().__init__(_MPI_TAG)
