"""The subclasses a module's ``__class__`` is swapped for (tensor-parallel roles, the unit-DP switches, the
vocabulary-parallel loss), each built once per (base class, key) and reused: every module of one class shares one
subclass, so ``type(a) is type(b)`` still holds between them and no class is built per module."""
from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

T = TypeVar("T")

# (base class, key) -> its subclass; a key names its caller's kind of swap (and, within it, e.g. the TP role)
_SUBCLASSES: dict[tuple[type, Hashable], type] = {}


def swapped_class(base: type[T], key: Hashable, namespace: Callable[[], dict[str, Any]], *,
                  mixins: tuple[type, ...] = (), name: str | None = None) -> type[T]:
    """The subclass of ``base`` (then ``mixins``) for ``key``, built at the first call from ``namespace()``.

    Without ``name`` it keeps ``base``'s ``__name__``, ``__qualname__`` and ``__module__``: Hugging Face's
    save_pretrained writes the class name into config.architectures, and a loader must find the class by it.
    With ``name``, ``__qualname__`` is that name and ``namespace()`` may set ``__module__`` (else ``base``'s)."""
    cls = _SUBCLASSES.get((base, key))
    if cls is None:
        ns = {"__qualname__": base.__qualname__ if name is None else name, "__module__": base.__module__,
              **namespace()}
        built = type(base.__name__ if name is None else name, (base, *mixins), ns)
        # setdefault, not a store: a thread that built the same subclass meanwhile keeps its own, and both
        # callers get that one (modules of one class share one type)
        cls = _SUBCLASSES.setdefault((base, key), built)
    return cast("type[T]", cls)
