"""Turn pydantic's errors into ErrorItems with dotted key paths and messages in our words (what is allowed, how to
fix)."""
from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ErrorItem

if TYPE_CHECKING:  # pragma: no cover
    from pydantic import BaseModel, ValidationError as PydanticValidationError

_SHOW_LIMIT = 80
_LIST_LIMIT = 12  # longer lists of allowed keys help nobody; did-you-mean does the work


def show(value: Any) -> str:
    """A short, readable rendering of a user value for messages."""
    if isinstance(value, int) and value.bit_length() > 256:  # repr of a huge int is slow, past 4300 digits an error
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    text = repr(value)
    return text if len(text) <= _SHOW_LIMIT else text[: _SHOW_LIMIT - 3] + "..."


def closest(word: Any, allowed: Iterable[str]) -> str | None:
    """The allowed word `word` is most likely a misspelling of, or None.

    Only close matches: a few typed characters off (a third of the word, at least 2), so that a shared prefix does
    not make `ml.p9.mega` look like `ml.g4dn.metal`, nor `input` like `input_mode`."""
    import difflib  # only when a message needs a suggestion; the estimators' import loads this module

    if not isinstance(word, str):
        return None
    allowed = list(allowed)
    bound = max(2, len(word) // 3)
    candidates = difflib.get_close_matches(word, allowed, n=5, cutoff=0.6)
    match = [c for c in candidates if typo_distance(word.lower(), c.lower()) <= bound][:1]
    if not match:
        match = [a for a in allowed if a.lower() == word.lower().replace("-", "_")][:1]
    return match[0] if match else None


def typo_distance(a: str, b: str) -> int:
    """Edits (insert, delete, replace, swap of neighbours) that turn `a` into `b` (optimal string alignment)."""
    if abs(len(a) - len(b)) > 8:
        return abs(len(a) - len(b))
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], prev2[j - 2] + 1)
        prev2, prev = prev, row
    return prev[len(b)]


def did_you_mean(word: Any, allowed: Iterable[str]) -> str:
    """'; did you mean 'x'?' or ''."""
    match = closest(word, allowed)
    return f"; did you mean {match!r}?" if match else ""


def join_path(*parts: Any) -> str:
    """('distribution', 'mpi', 'enabled') → 'distribution.mpi.enabled'; ints render as [i]."""
    out = ""
    for p in parts:
        if isinstance(p, int) and not isinstance(p, bool):
            out += f"[{p}]"
        else:
            out += f".{p}" if out else str(p)
    return out


MISSING: Any = ErrorItem("", "").value  # the "no value" marker of ErrorItem


def item(path: str, message: str, value: Any = MISSING) -> ErrorItem:
    return ErrorItem(path=path or "<root>", message=message, value=value)


# ---- navigating the schema to list allowed keys -------------------------------------------------
def _is_model(annotation: Any) -> bool:
    # pydantic is imported here, not at the top: this module is loaded with the estimators, before any schema is
    # needed, and only messages about pydantic's errors (pydantic long loaded by then) come here
    from pydantic import BaseModel

    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _unwrap(annotation: Any) -> list[Any]:
    """The concrete classes inside Optional/Union/list/dict annotations."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return [c for arg in typing.get_args(annotation) for c in _unwrap(arg)]
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (list, tuple, Sequence):
        return [c for arg in typing.get_args(annotation) for c in _unwrap(arg)]
    if origin is dict:
        args = typing.get_args(annotation)
        return _unwrap(args[1]) if len(args) == 2 else []
    return [annotation]


def _model_at(root: type[BaseModel], loc: Sequence[Any]) -> type[BaseModel] | None:
    current: type[BaseModel] | None = root
    for part in loc:
        if current is None:
            return None
        if not isinstance(part, str):
            continue  # list index / dict key: the element type was already unwrapped
        field = current.model_fields.get(part)
        if field is None:
            # a dict key (e.g. a channel name): stay on the element model already chosen
            continue
        models = [c for c in _unwrap(field.annotation) if _is_model(c)]
        current = models[0] if models else None
    return current


def allowed_keys(model: type[BaseModel]) -> list[str]:
    return sorted(name for name, f in model.model_fields.items() if not f.exclude)


def _child_models(model: type[BaseModel]) -> list[tuple[str, type[BaseModel]]]:
    return [(name, c) for name, f in model.model_fields.items() for c in _unwrap(f.annotation) if _is_model(c)]


def _misplaced_at(root: type[BaseModel], loc: Sequence[Any]) -> tuple[tuple[Any, ...], str] | None:
    """Where an unknown key belongs when it is a real key one level down or up (e.g. microbatches outside parameters),
    with the hint that says so."""
    if not loc:
        return None
    key = loc[-1]
    model = _model_at(root, loc[:-1])
    if model is not None:
        for name, child in _child_models(model):
            if key in child.model_fields:
                return (*loc[:-1], name, key), f"; it belongs under {name!r}"
    if len(loc) >= 2:
        parent = _model_at(root, loc[:-2])
        if parent is not None and key in parent.model_fields and isinstance(loc[-2], str):
            where = f"in {loc[-3]!r}" if len(loc) >= 3 else "at the top level"
            return (*loc[:-2], key), f"; it belongs one level up, {where}"
        # a sibling block's key, e.g. torch_distributed.processes_per_host, which SageMaker reads from mpi
        if parent is not None:
            for name, child in _child_models(parent):
                if name != loc[-2] and key in child.model_fields:
                    meant = (*loc[:-2], name, key)
                    return meant, f"; did you mean {join_path(*meant)}?"
    return None


def _misplaced(root: type[BaseModel], loc: Sequence[Any]) -> str:
    found = _misplaced_at(root, loc)
    return found[1] if found else ""


def intended_loc(root: type[BaseModel], loc: Sequence[Any]) -> tuple[Any, ...] | None:
    """The real key an unknown key at `loc` probably meant (a misspelling or a misplaced key), or None for a stray key.

    Rules must not reason about the meant key (its value was dropped), but a stray key changes nothing they read.
    """
    loc = _clean_loc(loc)
    if not loc:
        return None
    model = _model_at(root, loc[:-1])
    match = closest(loc[-1], allowed_keys(model)) if model is not None else None
    if match is not None:
        return (*loc[:-1], match)
    found = _misplaced_at(root, loc)
    return found[0] if found else None


# ---- conversion -------------------------------------------------------------------------------------
def _clean_loc(loc: Sequence[Any]) -> list[Any]:
    return [p for p in loc if p != "[key]"]


def _message(err: Mapping[str, Any], root: type[BaseModel]) -> str:
    kind = err["type"]
    value = err.get("input")
    ctx = err.get("ctx") or {}
    loc = _clean_loc(err["loc"])
    if kind == "extra_forbidden":
        model = _model_at(root, loc[:-1])
        keys = allowed_keys(model) if model is not None else []
        hint = did_you_mean(loc[-1] if loc else None, keys) or _misplaced(root, loc)
        allowed = f" (allowed: {', '.join(keys)})" if 0 < len(keys) <= _LIST_LIMIT else ""
        return f"unknown key{hint}{allowed}"
    if kind == "missing":
        return "is required"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        quoted = isinstance(value, str) and value.strip().lstrip("-").isdigit()
        return f"must be an integer, got {show(value)}" + ("; write it without quotes" if quoted else "")
    if kind in ("bool_type", "bool_parsing"):
        quoted = isinstance(value, str) and value.strip().lower() in ("true", "false")
        return f"must be true or false, got {show(value)}" + ("; write it without quotes" if quoted else "")
    if kind in ("string_type", "string_unicode"):
        return f"must be a string, got {show(value)}"
    if kind in ("float_type", "float_parsing", "finite_number"):
        return f"must be a number, got {show(value)}"
    if kind == "literal_error":
        expected = ctx.get("expected", "")
        options = [o.strip().strip("'") for o in str(expected).replace(" or ", ", ").split(",")]
        return f"must be one of {expected}, got {show(value)}{did_you_mean(value, options)}"
    bounds = {"greater_than_equal": ("≥", "ge"), "greater_than": (">", "gt"),
              "less_than_equal": ("≤", "le"), "less_than": ("<", "lt")}
    if kind in bounds:
        sign, key = bounds[kind]
        return f"must be {sign} {ctx.get(key)}, got {show(value)}"
    if kind in ("dict_type", "model_type", "model_attributes_type", "mapping_type"):
        return f"must be a mapping of keys to values, got {show(value)}"
    if kind in ("list_type", "tuple_type", "iterable_type"):
        return f"must be a list, got {show(value)}"
    if kind in ("string_too_short", "too_short"):
        return "must not be empty"
    if kind == "invalid_key":
        return f"keys must be strings, got {show(value)}"
    if kind in ("value_error", "assertion_error"):
        msg = str(ctx.get("error", err.get("msg", "")))
        return msg
    msg = str(err.get("msg", kind))
    return msg.replace("Input should be", "must be").replace("Value error, ", "")


def from_pydantic(exc: PydanticValidationError, root: type[BaseModel], prefix: Sequence[Any] = ()) -> list[ErrorItem]:
    out: list[ErrorItem] = []
    for err in exc.errors(include_url=False):
        loc = [*prefix, *_clean_loc(err["loc"])]
        path = join_path(*loc)
        message = _message(err, root)
        if err["type"] == "missing":
            out.append(item(path, message))
        else:
            out.append(item(path, message, err.get("input")))
    return out
