"""Every value of a request checked against the service model's own constraints, generically: the input shape is
walked with the value (structures, lists, maps, strings, numbers) and each string meets its shape's `pattern`, `enum`
and `min`/`max` length, each number its `min`/`max`, each list and map its size bounds. botocore's own validator
(protocol.validate) checks types and required members first; it checks no pattern, no enum and no maximum, and
botocore's client sends values as given, so a request can carry anything until this runs.

The service models' patterns are Java regular expressions matched against the whole value: they are translated to
Python's `re` (Unicode `\\p{..}` classes, Java's `.` that stops at every line terminator, ASCII `\\w\\d\\s`) and
matched with `re.fullmatch`, so a trailing newline never passes. A pattern that cannot be translated refuses its
value (fails closed); tests/serve/test_request_validation.py checks that every pattern serve meets translates.

Serve's own rule on top (it runs jobs on this machine, as root or a --run-as user): a value of shape `S3Uri` is an
s3://<bucket>/<key> URI, never https://, file:// or a path."""
from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import ErrorItem
from ..jobspec.error_items import join_path, show
from ..jobspec.rules.arguments import s3_uri_problem

# Java's `.` (without DOTALL) matches anything but these line terminators; Python's only stops at \n.
_JAVA_DOT = "[^\\n\\r\\u0085\\u2028\\u2029]"
# Java's POSIX classes (ASCII, as Java has them by default), as the inside of a character class
_POSIX = {"Alnum": "A-Za-z0-9", "Alpha": "A-Za-z", "Digit": "0-9", "Lower": "a-z", "Upper": "A-Z",
          "Punct": "!-/:-@\\[-`{-~", "Space": " \\t\\n\\x0b\\f\\r", "XDigit": "0-9A-Fa-f", "ASCII": "\\x00-\\x7f"}
_ENUM_SHOWN = 12
# The serve rules of a shape name: value → what is wrong with it (None: nothing).
SERVE_RULES: dict[str, Callable[[str], str | None]] = {"S3Uri": s3_uri_problem}


@functools.cache
def _categories() -> dict[str, list[tuple[int, int]]]:
    """Every Unicode general category (Lu, Ll, Zs, ...) as code point ranges: one pass over Unicode, made the first
    time a pattern names a category (SageMaker's tag patterns do)."""
    import unicodedata

    out: dict[str, list[tuple[int, int]]] = {}
    for cp in range(sys.maxunicode + 1):
        ranges = out.setdefault(unicodedata.category(chr(cp)), [])
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return out


def _category_ranges(prefix: str) -> str:
    """The code points of the general categories starting with `prefix` (L, N, Zs) as the inside of a class."""
    ranges = sorted(r for name, found in _categories().items() if name.startswith(prefix) for r in found)
    return "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges)


def _property(name: str) -> str:
    if name in _POSIX:
        return _POSIX[name]
    if re.fullmatch(r"[A-Z][a-z]?", name):
        ranges = _category_ranges(name)
        if ranges:
            return ranges
    raise ValueError(f"unknown character property \\p{{{name}}}")


def translated(pattern: str) -> str:
    """A Java pattern as a Python `re` pattern with the same meaning (ValueError for what this does not know)."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt in "pP" and pattern[i + 2: i + 3] == "{":
                end = pattern.index("}", i)
                inside = _property(pattern[i + 3: end])
                if nxt == "P" and in_class:
                    raise ValueError("a negated property inside a class")
                out.append(inside if in_class else f"[{'^' if nxt == 'P' else ''}{inside}]")
                i = end + 1
                continue
            out.append(pattern[i: i + 2])
            i += 2
            continue
        if in_class:
            if c == "[" or pattern.startswith("&&", i):
                raise ValueError("a nested or intersected character class")
            if c == "]" and not (out and out[-1] in ("[", "[^")):
                in_class = False
            out.append(c)
        elif c == "[":
            in_class = True
            if pattern[i + 1: i + 2] == "^":
                out.append("[^")
                i += 2
                continue
            out.append("[")
        elif c == ".":
            out.append(_JAVA_DOT)
        else:
            out.append(c)
        i += 1
    if in_class:
        raise ValueError("an unclosed character class")
    return "".join(out)


@functools.cache
def compiled(pattern: str) -> re.Pattern[str] | None:
    """The service model's pattern, ready for `fullmatch`; None when it cannot be translated (its values are
    refused)."""
    try:
        return re.compile(translated(pattern), re.ASCII)
    except (ValueError, re.error):
        return None


def _key(path: str, key: Any) -> str:
    """A map key in a key path: as it is when it is a plain word, else quoted (a key may hold anything)."""
    if isinstance(key, str) and re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", key):
        return join_path(path, key)
    return f"{path}[{show(key)}]"


def _problem(path: str, value: Any, constraint: str) -> ErrorItem:
    return ErrorItem(path, f"failed to satisfy constraint: {constraint}", value)


def _bounds(path: str, value: Any, size: int, shape: Any, what: str) -> Iterator[ErrorItem]:
    low, high = shape.metadata.get("min"), shape.metadata.get("max")
    if low is not None and size < low:
        yield _problem(path, value, f"Member must have {what} greater than or equal to {low}")
    if high is not None and size > high:
        yield _problem(path, value, f"Member must have {what} less than or equal to {high}")


# What no string of a request may hold, whatever its pattern (`.*` and `[\S\s]*` let both through): NUL (no
# argv, environment or path carries it) and a lone UTF-16 surrogate (JSON's "\ud800": no UTF-8 file, argv or
# environment can hold it; accepted, the job failed later with UnicodeEncodeError)
_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")


def _string(path: str, value: str, shape: Any) -> Iterator[ErrorItem]:
    bad = _NOT_TEXT.search(value)
    if bad is not None:
        what = "NUL" if bad.group() == "\x00" else f"a lone surrogate (U+{ord(bad.group()):04X})"
        yield _problem(path, value, f"Member must be text without NUL characters or lone surrogates (it has {what} "
                                    f"at position {bad.start()})")
        return
    yield from _bounds(path, value, len(value), shape, "length")
    enum = getattr(shape, "enum", None) or []
    if enum and value not in enum:
        shown = ", ".join(enum[:_ENUM_SHOWN]) + (f", ... ({len(enum)} values)" if len(enum) > _ENUM_SHOWN else "")
        yield _problem(path, value, f"Member must satisfy enum value set: [{shown}]")
    pattern = shape.metadata.get("pattern")
    if pattern is not None:
        regex = compiled(pattern)
        if regex is None:
            yield _problem(path, value, f"Member must satisfy regular expression pattern: {pattern} (a pattern "
                                        "smdist serve cannot check: the value is refused)")
            return
        if regex.fullmatch(value) is None:
            yield _problem(path, value, f"Member must satisfy regular expression pattern: {pattern}")
            return
    rule = SERVE_RULES.get(shape.name)
    if rule is not None:
        why = rule(value)
        if why:
            yield _problem(path, value, why)


def problems(shape: Any, value: Any, path: str = "") -> Iterator[ErrorItem]:
    """What `value` breaks of `shape`'s constraints, with key paths (types are botocore's check: a value of another
    type is skipped here)."""
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        for name, member in shape.members.items():
            if name in value and value[name] is not None:
                yield from problems(member, value[name], join_path(path, name) if path else name)
    elif kind == "list" and isinstance(value, list):
        yield from _bounds(path, value, len(value), shape, "length")
        for i, item in enumerate(value):
            yield from problems(shape.member, item, join_path(path, i))
    elif kind == "map" and isinstance(value, dict):
        yield from _bounds(path, value, len(value), shape, "length")
        for key, item in value.items():
            yield from problems(shape.key, key, f"{_key(path, key)}.<key>")
            yield from problems(shape.value, item, _key(path, key))
    elif kind == "string" and isinstance(value, str):
        yield from _string(path, value, shape)
    elif kind in ("integer", "long", "float", "double") and isinstance(value, (int, float)) \
            and not isinstance(value, bool):
        low, high = shape.metadata.get("min"), shape.metadata.get("max")
        if low is not None and value < low:
            yield _problem(path, value, f"Member must have value greater than or equal to {low}")
        if high is not None and value > high:
            yield _problem(path, value, f"Member must have value less than or equal to {high}")


def message(found: list[ErrorItem]) -> str:
    """SageMaker's ValidationException text for these problems."""
    # SageMaker's own wording: "Value ... at ... failed to satisfy constraint: ...", the value shown short, escaped
    count = len(found)
    return f"{count} validation error{'s' if count != 1 else ''} detected: " + "; ".join(
        f"Value {show(p.value)} at '{p.path}' {p.message}" for p in found)
