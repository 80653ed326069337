"""Cross-field validation rules. Each module's `check(ctx)` yields ErrorItems; all run, so all problems come at once."""
from __future__ import annotations

from ...errors import ErrorItem
from . import arguments, combinations, instances, smp, source, versions
from .context import RuleContext

RULES = (source.check, versions.check, instances.check, combinations.check, smp.check, arguments.check)

__all__ = ["RULES", "RuleContext", "run_rules"]


def run_rules(ctx: RuleContext) -> list[ErrorItem]:
    out: list[ErrorItem] = []
    for rule in RULES:
        out.extend(rule(ctx))
    return out
