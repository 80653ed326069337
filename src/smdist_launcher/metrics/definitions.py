"""SageMaker's metric_definitions (`[{"Name": ..., "Regex": ...}]`) applied to a log line.

As SageMaker does: each regex is searched in the line and its first group is the value; a capture that is not a
float is skipped. It runs on every line of every rank, so a line no regex can match costs one combined search.

The regexes come from the request (a serve client, a job spec) and run in the launcher's (or serve's) own process:
with `re`, a catastrophic regex holds the GIL for hours and freezes every thread. So they run with the `regex`
package, each search bounded in time and releasing the GIL, on at most MAX_LINE_CHARS of a line; a regex that runs
out of time is disabled for the job (one note), and the reader goes on with the others."""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

MAX_LINE_CHARS = 64 * 1024  # of a line searched: metrics sit near the start; a huge line costs no more than this
MATCH_TIMEOUT_S = 1.0       # per search: a sane metric regex takes microseconds on a 64 KiB line
# Searches that ran out of time before a metric is disabled: the timeout is wall-clock, so one stall of a loaded
# machine must not cost a sane metric its series; a catastrophic regex costs at most this many timeouts (the GIL is
# released meanwhile)
MAX_TIMEOUTS = 3

_BACKREFERENCE = re.compile(r"\\[1-9]|\(\?P=")


def _pairs(definitions: Iterable[Any]) -> list[tuple[str, str]]:
    out = []
    for d in definitions:
        if not isinstance(d, Mapping):
            d = d.model_dump() if hasattr(d, "model_dump") else vars(d)
        out.append((str(d["Name"]), str(d["Regex"])))
    return out


def compile_error(pattern: str) -> str | None:
    """Why the `regex` package cannot compile `pattern` (None when it can): what the parser will run."""
    import regex  # lazy: `import smdist_launcher` stays light

    try:
        regex.compile(pattern)
    except regex.error as exc:
        return str(exc)
    return None


class MetricParser:
    def __init__(self, definitions: Iterable[Any], *, on_disabled: Callable[[str, str], None] | None = None,
                 timeout_s: float = MATCH_TIMEOUT_S) -> None:
        self.definitions = _pairs(definitions)
        self.disabled: dict[str, str] = {}  # name -> why, for this job
        self._timeouts: dict[str, int] = {}  # name -> searches that ran out of time
        self._on_disabled = on_disabled
        self._timeout_s = timeout_s
        self._regexes: list[tuple[str, Any]] = []
        self._any: Any = None
        if not self.definitions:
            return
        import regex  # lazy: only a job with metric definitions pays for it

        for name, pattern in self.definitions:
            try:
                self._regexes.append((name, regex.compile(pattern)))
            except regex.error as exc:
                self._disable(name, f"its regex does not compile ({exc})")
        # One pass that tells whether any regex matches (the alternation matches where one of them does): most log
        # lines match none. Regexes the alternation cannot hold (backreferences, a group name twice) go one by one.
        if len(self._regexes) > 1 and not any(_BACKREFERENCE.search(r) for _, r in self.definitions):
            try:
                self._any = regex.compile("|".join(f"(?:{r.pattern})" for _, r in self._regexes))
            except regex.error:  # e.g. the same group name in two regexes
                self._any = None

    def __bool__(self) -> bool:
        return bool(self.definitions)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.definitions]

    def _disable(self, name: str, why: str) -> None:
        if name in self.disabled:
            return
        self.disabled[name] = why
        self._regexes = [(n, r) for n, r in self._regexes if n != name]
        if self._on_disabled is not None:
            self._on_disabled(name, why)

    def parse(self, line: str) -> list[tuple[str, float]]:
        """(name, value) of every definition whose regex matches the line (its first MAX_LINE_CHARS)."""
        if not self._regexes:
            return []
        line = line[:MAX_LINE_CHARS]
        if self._any is not None:
            try:
                if self._any.search(line, timeout=self._timeout_s, concurrent=True) is None:
                    return []
            except TimeoutError:
                self._any = None  # one of them is slow: search one by one, which finds and disables it
        found = []
        for name, regex in self._regexes:
            try:
                m = regex.search(line, timeout=self._timeout_s, concurrent=True)
            except TimeoutError:
                self._timeouts[name] = self._timeouts.get(name, 0) + 1
                if self._timeouts[name] >= MAX_TIMEOUTS:
                    self._disable(name, f"its regex ran longer than {self._timeout_s:g} s on {MAX_TIMEOUTS} lines "
                                        f"(the last of {len(line)} characters)")
                continue
            if m is None:
                continue
            text = m.group(1) if regex.groups else m.group(0)
            try:
                value = float(text)
            except (TypeError, ValueError):
                continue
            if math.isfinite(value):
                found.append((name, value))
        return found
