from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from smdist_launcher.jobspec.resolved import ResolvedJob
from smdist_launcher.plan import snapshot
from smdist_launcher.plan.planner import build_plan


def test_format_follows_extension() -> None:
    assert [snapshot.format_for(p) for p in ("a.json", "a.yaml", "a.YML", "a.txt")] == ["json", "yaml", "yaml", "json"]
    assert snapshot.format_for("a.json", "yaml") == "yaml"


def test_check_write_and_diff(tmp_path: Path, make_job: Callable[..., ResolvedJob]) -> None:
    pinned = tmp_path / "plans" / "job.yaml"
    rendered = snapshot.render(build_plan(make_job()), "yaml")
    assert snapshot.check(rendered, pinned).missing
    assert snapshot.write(rendered, pinned) is True
    assert snapshot.write(rendered, pinned) is False  # unchanged: file left alone
    assert snapshot.check(rendered, pinned).matches

    changed = snapshot.render(build_plan(make_job(hyperparameters={"epochs": 3, "lr": 0.1})), "yaml")
    result = snapshot.check(changed, pinned)
    assert not result.matches
    assert "-  epochs: 2" in result.diff and "+  epochs: 3" in result.diff
    assert result.diff.startswith(f"--- {pinned} (pinned)\n+++ {pinned} (current)\n")
    assert "--plan-snapshot-update" in result.message()
