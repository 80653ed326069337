"""Read a job file's YAML without letting the file decide how much time or memory that takes.

PyYAML's SafeLoader already refuses arbitrary objects; it still lets a ~1 KB file expand (through aliases of
aliases, a "billion laughs") into billions of values for whoever walks the result, recurses once per nesting
level (5,000 `[` end in RecursionError), and raises bare ValueErrors, IndexErrors, KeyErrors... for `!!int abc`,
an empty `!!int`, `!!bool maybe` or integers beyond Python's 4,300-digit conversion limit. Here the composed node
graph is checked before anything is built: every problem becomes an ErrorItem with the key path and the limit."""
from __future__ import annotations

import re
from typing import Any

from ..errors import ErrorItem
from .error_items import MISSING, item, show

MAX_FILE_BYTES = 1024 * 1024          # a job file is a page of settings, not data
MAX_DEPTH = 50                        # nesting levels (job files need < 10)
MAX_EXPANDED_NODES = 100_000          # values after expanding every alias (aliases of aliases multiply)
MAX_INT_DIGITS = 100                  # far beyond any count, size or seed

_MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlLimitError(Exception):
    """The document breaks a limit: `items` say where and which."""

    def __init__(self, items: list[ErrorItem]) -> None:
        super().__init__("; ".join(f"{i.path}: {i.message}" for i in items))
        self.items = items


def loader_class() -> Any:
    """A SafeLoader that rejects duplicate keys and nesting deeper than MAX_DEPTH (while composing, before Python's
    recursion limit is near)."""
    import yaml  # lazy: only job files need it

    class Loader(yaml.SafeLoader):
        def compose_node(self, parent: Any, index: Any) -> Any:
            # index: the key node (a mapping's value), an int (a sequence's item) or None (a mapping's key)
            path = self.__dict__.setdefault("_path", [])
            step = f"[{index}]" if isinstance(index, int) else (
                _key_text(index) if index is not None else "<key>")
            path.append(step)
            try:
                if len(path) > MAX_DEPTH:
                    mark = self.peek_event().start_mark
                    raise YamlLimitError([item(
                        _path_text(path[1:]), f"nesting deeper than {MAX_DEPTH} levels (line {mark.line + 1}, "
                        f"column {mark.column + 1}); a job file needs a few levels: flatten the structure")])
                return super().compose_node(parent, index)
            finally:
                path.pop()

    def construct_mapping(loader: Any, node: Any, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue  # `<<: *base` merges keys that the mapping's own keys may override (not duplicates)
            key = loader.construct_object(key_node, deep=deep)
            if not isinstance(key, (str, int, float, bool)):
                continue  # unhashable keys are reported by the schema
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return loader.construct_mapping(node, deep=deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return Loader


def _path_text(steps: list[str], limit: int = 60) -> str:
    text = "".join(s if s.startswith("[") else f".{s}" for s in steps).lstrip(".") or "<root>"
    return text if len(text) <= limit else text[:limit] + "..."


def _key_text(node: Any) -> str:
    import yaml

    return str(node.value) if isinstance(node, yaml.ScalarNode) else "<key>"


def check_nodes(root: Any, loader: Any) -> list[ErrorItem]:
    """Alias expansion and scalar problems of a composed document, each with its key path."""
    import yaml

    errors: list[ErrorItem] = []
    seen: dict[int, tuple[int, int]] = {}   # node -> (expanded size, height): aliases share nodes (a DAG)
    on_path: set[int] = set()
    too_deep = [False]

    def walk(node: Any, path: str, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in on_path:
            errors.append(item(path or "<root>", "an alias refers to a node that contains it (a recursive "
                                                 "structure); a job file cannot hold one"))
            return 1, 0
        if key not in seen:
            if depth > MAX_DEPTH:  # only reachable through aliases: composing already bounds the written nesting
                too_deep[0] = True
                return 1, 0
            on_path.add(key)
            total, height = 1, 0
            if isinstance(node, yaml.MappingNode):
                children = [(k, path) for k, _ in node.value]
                children += [(v, f"{path}.{_key_text(k)}" if path else _key_text(k)) for k, v in node.value]
            elif isinstance(node, yaml.SequenceNode):
                children = [(v, f"{path}[{i}]") for i, v in enumerate(node.value)]
            else:
                children = []
            errors.extend(_tag_problems(node, path or "<root>", loader))
            for child, child_path in children:
                n, h = walk(child, child_path, depth + 1)
                total, height = total + n, max(height, h + 1)
            on_path.discard(key)
            seen[key] = (total, height)
        total, height = seen[key]
        if depth + height > MAX_DEPTH:
            too_deep[0] = True
        return total, height

    expanded, _ = walk(root, "", 0)
    if too_deep[0]:
        errors.append(item("<root>", f"nesting deeper than {MAX_DEPTH} levels once aliases are expanded; a job file "
                                     "needs a few levels: flatten the structure"))
    if expanded > MAX_EXPANDED_NODES:
        errors.append(item("<root>", f"the document expands to more than {MAX_EXPANDED_NODES:,} values (aliases of "
                                     "aliases multiply); write the values out, or use fewer aliases"))
    return errors


_YAML = "tag:yaml.org,2002:"
# scalar tags: (what the value must be, an example); constructing one runs PyYAML's own parser for that tag
_SCALARS: dict[str, tuple[str, str]] = {
    "int": ("an integer", "2"), "float": ("a number", "0.5"), "bool": ("true or false", "true"),
    "timestamp": ("a date or date-time", "2024-01-31"), "binary": ("base64 data", "aGk="),
    "null": ("null", "null"), "str": ("text", "abc"),
}
# collection tags: the node kind each needs
_COLLECTIONS: dict[str, str] = {"seq": "a list", "omap": "a list", "pairs": "a list", "map": "a mapping",
                                "set": "a mapping"}


def _tag_text(tag: str) -> str:
    return "!!" + tag[len(_YAML):] if tag.startswith(_YAML) else tag


def _kind(node: Any) -> str:
    import yaml

    return "a list" if isinstance(node, yaml.SequenceNode) else "a mapping" if isinstance(node, yaml.MappingNode) \
        else "a single value"


def _written_tag(node: Any, loader: Any) -> bool:
    """Whether the tag is in the text (`!!int x`, `&a !!int x`), not resolved by YAML from a plain value."""
    start, end = node.start_mark.index, node.end_mark.index
    text = loader.buffer[start:end] if isinstance(getattr(loader, "buffer", None), str) else ""
    return re.match(r"(&\S+\s+)?!", text) is not None


def _tag_problems(node: Any, path: str, loader: Any) -> list[ErrorItem]:
    """A tag the node's value cannot be read as (`!!int` with nothing after it, `!!bool maybe`, `!!seq abc`, an
    unknown `!foo`): PyYAML raises IndexError, KeyError, AttributeError... for these, not YAMLError, so they are
    checked here, where the key path is known."""
    import yaml

    tag = node.tag
    name = tag[len(_YAML):] if tag.startswith(_YAML) else None
    shown = _tag_text(tag)
    if name in _COLLECTIONS:
        need = _COLLECTIONS[name]
        if _kind(node) != need:
            value = node.value if isinstance(node, yaml.ScalarNode) else MISSING
            return [item(path, f"tagged {shown}, which needs {need}, but holds {_kind(node)}; write {need} after the "
                               "tag, or remove the tag", value)]
        return []
    if name in _SCALARS:
        what, example = _SCALARS[name]
        if not isinstance(node, yaml.ScalarNode):
            return [item(path, f"tagged {shown}, which needs {what}, but holds {_kind(node)}; write {what} "
                               f"(e.g. {shown} {example}), or remove the tag")]
        if name == "int":
            digits = sum(c.isdigit() for c in node.value)
            if digits > MAX_INT_DIGITS:
                return [item(path, f"an integer of {digits} digits; at most {MAX_INT_DIGITS} digits are accepted",
                             node.value)]
        elif name == "float" and len(node.value) > MAX_INT_DIGITS * 2:
            return [item(path, f"a number of {len(node.value)} characters; at most {MAX_INT_DIGITS * 2} are "
                               "accepted", node.value)]
        try:
            loader.yaml_constructors[tag](loader, node)
        except Exception:  # noqa: BLE001 - each scalar constructor fails its own way (ValueError, IndexError, ...)
            bad = "an empty value" if node.value == "" else show(node.value)
            if not _written_tag(node, loader):  # e.g. 2024-13-45: YAML itself read it as a date
                return [item(path, f"{bad} reads as {what} ({shown}) but is not a valid one; quote the value to keep "
                                   f"it as text, or write a valid one (e.g. {example})", node.value)]
            return [item(path, f"{bad} is not {what} ({shown}); write {what} (e.g. {shown} {example}), remove the "
                               "tag, or quote the value to keep it as text", node.value)]
        return []
    if tag == _YAML + "value" and not _written_tag(node, loader):  # a plain `=`: YAML's (unsupported) value key
        return [item(path, "'=' reads as YAML's !!value key, which SafeLoader cannot build; quote it ('=') to keep "
                           "it as text", node.value)]
    # `<<` (merge) keys are handled by the mapping constructor itself, not by a tag constructor
    if tag not in loader.yaml_constructors and tag != _MERGE_TAG:
        value = node.value if isinstance(node, yaml.ScalarNode) else MISSING
        return [item(path, f"unknown tag {shown}; a job file holds plain YAML (text, numbers, true/false, lists, "
                           f"mappings, and the standard tags such as !!int or !!str): remove the tag", value)]
    return []


def load(text: str) -> Any:
    """The document's data; YamlLimitError for a document over the limits, yaml.YAMLError for invalid YAML."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise YamlLimitError([item("<root>", f"the job file is larger than {MAX_FILE_BYTES // 1024} KiB; keep "
                                             "data out of it (inputs: name channels instead)")])
    loader = loader_class()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        errors = check_nodes(node, loader)
        if errors:
            raise YamlLimitError(errors)
        return loader.construct_document(node)
    finally:
        loader.dispose()
