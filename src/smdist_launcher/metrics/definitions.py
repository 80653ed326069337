"""SageMaker's metric_definitions (`[{"Name": ..., "Regex": ...}]`) applied to a log line.

As SageMaker does: each regex is searched in the line and its first group is the value; a capture that is not a
float is skipped. It runs on every line of every rank, so a line no regex can match costs one combined search."""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

_BACKREFERENCE = re.compile(r"\\[1-9]|\(\?P=")


def _pairs(definitions: Iterable[Any]) -> list[tuple[str, str]]:
    out = []
    for d in definitions:
        if not isinstance(d, Mapping):
            d = d.model_dump() if hasattr(d, "model_dump") else vars(d)
        out.append((str(d["Name"]), str(d["Regex"])))
    return out


class MetricParser:
    def __init__(self, definitions: Iterable[Any]) -> None:
        self.definitions = _pairs(definitions)
        self._regexes = [(name, re.compile(regex)) for name, regex in self.definitions]
        # One pass that tells whether any regex matches (the alternation matches where one of them does): most log
        # lines match none. Regexes the alternation cannot hold (backreferences, a group name twice) go one by one.
        self._any: re.Pattern[str] | None = None
        if len(self.definitions) > 1 and not any(_BACKREFERENCE.search(r) for _, r in self.definitions):
            try:
                self._any = re.compile("|".join(f"(?:{r})" for _, r in self.definitions))
            except re.error:  # e.g. the same group name in two regexes
                self._any = None

    def __bool__(self) -> bool:
        return bool(self._regexes)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.definitions]

    def parse(self, line: str) -> list[tuple[str, float]]:
        """(name, value) of every definition whose regex matches the line."""
        if not self._regexes or (self._any is not None and self._any.search(line) is None):
            return []
        found = []
        for name, regex in self._regexes:
            m = regex.search(line)
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
