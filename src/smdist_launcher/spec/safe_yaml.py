"""Read a job file's YAML without letting the file decide how much time or memory that takes.

PyYAML's SafeLoader already refuses arbitrary objects; it still lets a ~1 KB file expand (through aliases of
aliases, a "billion laughs") into billions of values for whoever walks the result, recurses once per nesting
level (5,000 `[` end in RecursionError), and raises bare ValueErrors for `!!int abc` or integers beyond
Python's 4,300-digit conversion limit. Here the composed node graph is checked before anything is built:
every problem becomes an ErrorItem with the key path and the limit."""
from __future__ import annotations

from typing import Any

from ..errors import ErrorItem
from .error_items import item, show

MAX_FILE_BYTES = 1024 * 1024          # a job file is a page of settings, not data
MAX_DEPTH = 50                        # nesting levels (job files need < 10)
MAX_EXPANDED_NODES = 100_000          # values after expanding every alias (aliases of aliases multiply)
MAX_INT_DIGITS = 100                  # far beyond any count, size or seed

_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
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
                errors.extend(_scalar_problems(node, path or "<root>", loader))
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


def _scalar_problems(node: Any, path: str, loader: Any) -> list[ErrorItem]:
    if node.tag == _INT_TAG:
        digits = sum(c.isdigit() for c in node.value)
        if digits > MAX_INT_DIGITS:
            return [item(path, f"an integer of {digits} digits; at most {MAX_INT_DIGITS} digits are accepted",
                         node.value)]
        what, construct = "an integer", loader.construct_yaml_int
    elif node.tag == _FLOAT_TAG:
        if len(node.value) > MAX_INT_DIGITS * 2:
            return [item(path, f"a number of {len(node.value)} characters; at most {MAX_INT_DIGITS * 2} are "
                               "accepted", node.value)]
        what, construct = "a number", loader.construct_yaml_float
    else:
        return []
    try:
        construct(node)
    except (ValueError, OverflowError):
        return [item(path, f"{show(node.value)} is not {what} (tagged {node.tag.rsplit(':', 1)[-1]}); write "
                           f"{what}, or quote the value to keep it as a string", node.value)]
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
