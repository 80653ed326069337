"""Every attempt's hosts are staged from scratch on trees no earlier attempt used: each channel shape stages the same
way the second time (before the one kept layout, a retry re-staged into attempt 1's trees: a single-file channel
failed with EEXIST, a container command's copied channel with ENOTEMPTY)."""
from __future__ import annotations

from pathlib import Path

import pytest

from smdist_launcher.backends.toolkit.attempt.host_staging import stage_hosts
from smdist_launcher.backends.toolkit.attempt.kept_layout import keep_hosts, kept_attempts
from smdist_launcher.backends.toolkit.jobdir import JobDir
from smdist_launcher.backends.toolkit.outputs import checkpoint_dir
from smdist_launcher.backends.toolkit.staging import LocalCode
from smdist_launcher.plan.model import Channel

from ...plans import tiny_plan


def _inputs(tmp_path: Path) -> dict[str, Channel]:
    data = tmp_path / "data"
    (data / "folder").mkdir(parents=True)
    (data / "folder" / "a.csv").write_text("a")
    (data / "sharded").mkdir()
    for i in range(4):
        (data / "sharded" / f"part-{i}.csv").write_text(str(i))
    (data / "train.csv").write_text("x")
    return {"single": Channel(uri=str(data / "train.csv")), "folder": Channel(uri=str(data / "folder")),
            "sharded": Channel(uri=str(data / "sharded"), distribution="ShardedByS3Key")}


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("launcher", ["torchrun", "container_command"])
def test_every_channel_shape_stages_again_on_a_fresh_tree(tmp_path: Path, launcher: str) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("print('hi')\n")
    plan = tiny_plan(channels=_inputs(tmp_path), launcher=launcher)
    job = JobDir(tmp_path / "job")
    first = stage_hosts(job, plan, LocalCode(src))
    # what attempt 1 leaves behind: outputs, a failure record, a master's done note
    for paths in first.hosts.values():
        paths.output_dir.mkdir(parents=True, exist_ok=True)
        (paths.output_dir / "failure.json").write_text("{}")
        (paths.model_dir / "weights-attempt1.txt").write_text("1")
    before = {h: _listing(p.root) for h, p in first.hosts.items()}
    kept = keep_hosts(job, 1, plan.host_names)
    second = stage_hosts(job, plan, LocalCode(src))
    for h, paths in second.hosts.items():
        assert not paths.failure_json_file.exists() and not any(paths.model_dir.iterdir())
        assert _listing(paths.input_data_dir) == _listing(kept[h].input_data_dir)  # staged as for attempt 1
        assert (paths.channel_dir("single") / "train.csv").is_file() and (paths.code_dir / "train.py").is_file()
        assert _listing(kept[h].root) == before[h]  # attempt 1's tree, whole, under attempts/1/<host>/
    algo2 = sorted(p.name for p in second.hosts["algo-2"].channel_dir("sharded").iterdir())
    assert algo2 == ["part-1.csv", "part-3.csv"]
    assert list(kept_attempts(job)) == [1] and set(kept_attempts(job)[1]) == {"algo-1", "algo-2"}
    copies = launcher == "container_command"  # a container command's hosts get copies of their own
    assert (second.hosts["algo-1"].channel_dir("folder").is_symlink()) is not copies


def test_staging_into_a_tree_an_attempt_used_is_refused(tmp_path: Path) -> None:
    plan = tiny_plan(channels=_inputs(tmp_path))
    job = JobDir(tmp_path / "job")
    stage_hosts(job, plan, None)
    with pytest.raises(FileExistsError, match="earlier attempt"):
        stage_hosts(job, plan, None)


def test_checkpoints_are_restored_into_every_fresh_tree(tmp_path: Path) -> None:
    store = tmp_path / "ckpt"
    store.mkdir()
    (store / "state.pt").write_text("step 4")
    plan = tiny_plan(checkpoint_s3_uri=store.as_uri())
    job = JobDir(tmp_path / "job")
    stage_hosts(job, plan, None)
    keep_hosts(job, 1, plan.host_names)
    staged = stage_hosts(job, plan, None)
    assert staged.restored == 1
    assert all((checkpoint_dir(plan, p) / "state.pt").read_text() == "step 4" for p in staged.hosts.values())
