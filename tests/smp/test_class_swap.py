"""``tensor_parallel.class_swap``: one subclass per (base class, key), built once, named as its callers need."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from smdist_launcher.smp.tensor_parallel.class_swap import swapped_class  # noqa: E402


class Base(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Mixin:
    def switch(self) -> str:
        return "mixin"


def test_one_subclass_per_base_and_key() -> None:
    built: list[str] = []

    def namespace(tag: str) -> dict[str, object]:
        built.append(tag)
        return {"tag": tag}

    first = swapped_class(Base, ("test", "a"), lambda: namespace("a"))
    assert swapped_class(Base, ("test", "a"), lambda: namespace("again")) is first
    other = swapped_class(Base, ("test", "b"), lambda: namespace("b"))
    assert other is not first and issubclass(other, Base) and issubclass(first, Base)
    assert (first.tag, other.tag, built) == ("a", "b", ["a", "b"])  # type: ignore[attr-defined]

    class Derived(Base):
        pass
    assert swapped_class(Derived, ("test", "a"), lambda: namespace("d")) not in (first, other)  # keyed by base too

    module = Base()
    module.__class__ = first
    assert isinstance(module, Base) and module(torch.ones(1)).item() == 1.0 and module.tag == "a"


def test_names_kept_unless_given() -> None:
    kept = swapped_class(Base, ("test", "kept"), dict, mixins=(Mixin,))
    # the base's own name: Hugging Face writes it into config.architectures
    assert (kept.__name__, kept.__qualname__, kept.__module__) == ("Base", "Base", Base.__module__)
    assert kept.__bases__ == (Base, Mixin) and kept().switch() == "mixin"  # type: ignore[attr-defined]
    named = swapped_class(Base, ("test", "named"), lambda: {"__module__": "elsewhere"}, name="TPColBase")
    assert (named.__name__, named.__qualname__, named.__module__) == ("TPColBase", "TPColBase", "elsewhere")


def test_a_swap_built_meanwhile_by_another_thread_is_the_one_both_get() -> None:
    """Two threads swapping one class at once (the second builds while the first is still building): both get
    one subclass, so their modules still share one type (before: the first overwrote the second's entry)."""
    import threading

    got: dict[str, type] = {}

    def other() -> None:
        got["other"] = swapped_class(Base, ("test", "race"), dict)

    def namespace() -> dict[str, object]:
        if "other" not in got:  # the first build: the other thread swaps the same class now, to the end
            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
        return {}

    got["first"] = swapped_class(Base, ("test", "race"), namespace)
    assert got["first"] is got["other"] is swapped_class(Base, ("test", "race"), dict)
