"""Every test runs: in CI (scripts/test.sh sets $SMDIST_TEST_NO_SKIPS; CI=true does too) the run fails when a test
that is not marked `gpu` skipped (issue 32: a skip that depended on test order went unnoticed). A pytest plugin of
its own (tests/conftest.py loads it) so tests/test_skip_policy.py can run it on a small suite."""
from __future__ import annotations

import os
from collections.abc import Generator

import pytest

NO_SKIPS_ENV = "SMDIST_TEST_NO_SKIPS"   # scripts/test.sh (what CI runs) sets it; so does CI=true


def skips_forbidden() -> bool:
    return os.environ.get(NO_SKIPS_ENV, "") not in ("", "0") or os.environ.get("CI", "").lower() in ("true", "1")


class SkipPolicy:
    def __init__(self) -> None:
        self.skips: list[str] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item,
                                  call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Record every skipped test without the `gpu` marker (the marker itself: a report's keywords also hold
        parametrize ids and folder names, so a case or folder called "gpu" would pass for one)."""
        report = yield
        if report.skipped and not hasattr(report, "wasxfail") and item.get_closest_marker("gpu") is None:
            self.skips.append(f"{report.nodeid}: {_reason(report)}")
        return report

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A module skipped while collected (module-level importorskip or skip): it has no marker to read."""
        if report.skipped:
            self.skips.append(f"{report.nodeid}: {_reason(report)} (the whole module)")

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Fail the run when a test other than a GPU one skipped: in CI every other test must run."""
        if not self.skips or not skips_forbidden():
            return
        lines = [f"{len(self.skips)} test(s) skipped that are not GPU tests (only `-m gpu` tests may skip when "
                 f"${NO_SKIPS_ENV} or CI=true):", *(f"  {s}" for s in self.skips)]
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("\n".join(lines), red=True)
        else:
            print("\n".join(lines))
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    return str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SkipPolicy(), "smdist-skip-policy")
