"""Cross-field validation rules. Each module's `check(ctx)` yields ErrorItems; all run, so all problems come at once.

The rule modules are imported by the first run_rules(), not with this package: the estimators import the package
(for RuleContext and cluster_of) and their import must stay fast; some rules load the schemas and the image catalog.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from ...errors import ErrorItem
from .context import RuleContext

Rule = Callable[[RuleContext], Iterable[ErrorItem]]

__all__ = ["Rule", "RuleContext", "all_rules", "run_rules"]


@functools.cache
def all_rules() -> tuple[Rule, ...]:
    """Every rule, in the order they run."""
    from . import arguments, combinations, instances, smp, source, versions

    return (source.check, versions.check, instances.check, combinations.check, smp.check, arguments.check)


def run_rules(ctx: RuleContext) -> list[ErrorItem]:
    out: list[ErrorItem] = []
    for rule in all_rules():
        out.extend(rule(ctx))
    return out
