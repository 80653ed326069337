"""The plan_snapshot fixture as a user's CI sees it: a separate pytest run in a temporary project."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

USER_TEST = '''
from smdist_launcher.plan.planner import build_plan
from smdist_launcher.jobspec.resolved import InstanceInfo, ResolvedJob

EPOCHS = {epochs}

def test_plan(plan_snapshot):
    job = ResolvedJob(framework="pytorch", job_name="j", entry_point="train.py", instance_type="local",
                      instance_count=2, instance=InstanceInfo(instance_type="local", local=True), processes_per_host=2,
                      strategy="torch_distributed", network_interface="lo", hyperparameters={{"epochs": EPOCHS}})
    plan_snapshot.assert_match(build_plan(job), "plans/job.json")
'''


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
                          cwd=project, capture_output=True, text=True, timeout=120)


def test_fixture_pins_updates_and_reports_diffs(tmp_path: Path) -> None:
    test_file = tmp_path / "test_user.py"
    test_file.write_text(USER_TEST.format(epochs=2))
    missing = _pytest(tmp_path)
    assert missing.returncode == 1 and "no pinned plan yet" in missing.stdout

    updated = _pytest(tmp_path, "--plan-snapshot-update")
    assert updated.returncode == 0, updated.stdout
    assert "plan snapshots written: 1" in updated.stdout
    assert '"epochs": 2' in (tmp_path / "plans" / "job.json").read_text()
    assert _pytest(tmp_path).returncode == 0

    test_file.write_text(USER_TEST.format(epochs=3))
    changed = _pytest(tmp_path)
    assert changed.returncode == 1
    assert '-    "epochs": 2' in changed.stdout and '+    "epochs": 3' in changed.stdout
