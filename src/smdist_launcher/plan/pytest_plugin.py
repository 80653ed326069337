"""pytest plugin (entry point ``pytest11``): the ``plan_snapshot`` fixture pins launch plans in users' CI.

    def test_plan(plan_snapshot):
        plan_snapshot.assert_match(est.plan(), "plans/job.json")   # path relative to the test file

``pytest --plan-snapshot-update`` writes/rewrites the pinned files instead of failing. Loaded in every pytest
session where smdist-launcher is installed, so it imports nothing heavy until a test uses the fixture.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from .model import LaunchPlan

_UPDATE_OPTION = "--plan-snapshot-update"
_UPDATED_KEY = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("smdist", "smdist-launcher plan snapshots")
    group.addoption(_UPDATE_OPTION, action="store_true", default=False,
                    help="write or rewrite the pinned launch plans used by the plan_snapshot fixture")


class PlanSnapshot:
    """Compares plans with pinned files next to the test (or rewrites them in update mode)."""

    def __init__(self, base_dir: Path, update: bool, updated: list[str]) -> None:
        self.base_dir = base_dir
        self.update = update
        self._updated = updated

    def assert_match(self, plan: LaunchPlan, path: str | os.PathLike[str], *, fmt: str | None = None) -> None:
        from . import snapshot

        target = Path(path) if Path(path).is_absolute() else self.base_dir / path
        rendered = snapshot.render(plan, snapshot.format_for(target, fmt))
        if self.update:
            if snapshot.write(rendered, target):
                self._updated.append(str(target))
            return
        result = snapshot.check(rendered, target)
        if not result.matches:
            pytest.fail(result.message(), pytrace=False)


@pytest.fixture
def plan_snapshot(request: pytest.FixtureRequest) -> PlanSnapshot:
    config = request.config
    updated = config.stash.setdefault(_UPDATED_KEY, [])
    return PlanSnapshot(Path(request.path).parent, bool(config.getoption(_UPDATE_OPTION)), updated)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    updated = config.stash.get(_UPDATED_KEY, [])
    if updated:
        terminalreporter.write_sep("-", f"plan snapshots written: {len(updated)}")
        for path in updated:
            terminalreporter.write_line(f"  {path}")
