from __future__ import annotations

from pathlib import Path

import pytest

from smdist_launcher.backends.toolkit.staging import local_code_source, stage_channels, stage_code
from smdist_launcher.contract import MLPaths
from smdist_launcher.plan.model import Channel

from ..plans import tiny_plan


def _hosts(tmp_path: Path, n: int = 2) -> dict[str, MLPaths]:
    hosts = {}
    for i in range(1, n + 1):
        paths = MLPaths(tmp_path / "job" / f"algo-{i}")
        hosts[f"algo-{i}"] = paths
    return hosts


def _prepare(hosts: dict[str, MLPaths], channels: list[str]) -> None:
    for paths in hosts.values():  # what write_host_config leaves: empty channel folders
        for name in channels:
            paths.channel_dir(name).mkdir(parents=True)


def _data(tmp_path: Path) -> Path:
    src = tmp_path / "data"
    (src / "sub").mkdir(parents=True)
    for name in ("a.txt", "b.txt", "c.txt", "sub/d.txt"):
        (src / name).write_text(name)
    return src


def test_local_channel_is_linked_into_every_host(tmp_path):
    src = _data(tmp_path)
    hosts = _hosts(tmp_path)
    _prepare(hosts, ["training", "plain"])
    plan = tiny_plan(channels={"training": f"file://{src}", "plain": str(src / "a.txt")})
    stage_channels(plan, hosts, tmp_path / "staging")
    for paths in hosts.values():
        assert paths.channel_dir("training").is_symlink()
        assert (paths.channel_dir("training") / "sub" / "d.txt").read_text() == "sub/d.txt"
        assert (paths.channel_dir("plain") / "a.txt").read_text() == "a.txt"


def test_sharded_local_channel_gives_each_host_its_share(tmp_path):
    src = _data(tmp_path)
    hosts = _hosts(tmp_path)
    _prepare(hosts, ["training"])
    plan = tiny_plan(channels={"training": Channel(uri=str(src), distribution="ShardedByS3Key")})
    stage_channels(plan, hosts, tmp_path / "staging")
    files = {h: sorted(p.relative_to(paths.channel_dir("training")).as_posix()
                       for p in paths.channel_dir("training").rglob("*.txt")) for h, paths in hosts.items()}
    assert files == {"algo-1": ["a.txt", "c.txt"], "algo-2": ["b.txt", "sub/d.txt"]}


def test_missing_local_channel_names_the_input(tmp_path):
    hosts = _hosts(tmp_path)
    _prepare(hosts, ["training"])
    plan = tiny_plan(channels={"training": f"file://{tmp_path}/nope"})
    with pytest.raises(FileNotFoundError, match=r"inputs\.training: file://.*/nope does not exist"):
        stage_channels(plan, hosts, tmp_path / "staging")


def test_s3_channel_downloaded_once_and_linked(tmp_path, s3):
    for key in ("train/x.txt", "train/deep/y.txt", "train/z.txt", "other/no.txt"):
        s3.put_object(Bucket=s3.bucket, Key=key, Body=key.encode())
    hosts = _hosts(tmp_path)
    _prepare(hosts, ["training", "sharded"])
    plan = tiny_plan(channels={"training": f"s3://{s3.bucket}/train",
                               "sharded": Channel(uri=f"s3://{s3.bucket}/train/", distribution="ShardedByS3Key")})
    stage_channels(plan, hosts, tmp_path / "staging")
    for paths in hosts.values():
        channel = paths.channel_dir("training")
        assert channel.resolve() == (tmp_path / "staging" / "training").resolve()
        assert sorted(p.relative_to(channel).as_posix() for p in channel.rglob("*.txt")) == [
            "deep/y.txt", "x.txt", "z.txt"]
    shares = [sorted(p.name for p in hosts[h].channel_dir("sharded").rglob("*.txt")) for h in hosts]
    assert shares == [["y.txt", "z.txt"], ["x.txt"]]


def test_s3_objects_whose_names_reach_the_file_name_limit_are_staged(tmp_path, s3):
    """A key segment of 247-255 bytes is a valid file name; the download's temporary name must not be longer."""
    names = ["a" * 247, "b" * 250, "c" * 255]
    for name in names:
        s3.put_object(Bucket=s3.bucket, Key=f"long/{name}", Body=name.encode())
    hosts = _hosts(tmp_path, 1)
    _prepare(hosts, ["training"])
    plan = tiny_plan(hosts=1, channels={"training": f"s3://{s3.bucket}/long"})
    stage_channels(plan, hosts, tmp_path / "staging")
    channel = hosts["algo-1"].channel_dir("training")
    assert sorted(p.name for p in channel.iterdir()) == names  # nothing else left behind (no temporary files)
    assert all((channel / name).read_text() == name for name in names)


def test_s3_key_escaping_the_channel_is_refused(tmp_path, s3):
    s3.put_object(Bucket=s3.bucket, Key="evil/../../outside.txt", Body=b"x")
    hosts = _hosts(tmp_path, 1)
    _prepare(hosts, ["training"])
    plan = tiny_plan(hosts=1, channels={"training": f"s3://{s3.bucket}/evil"})
    with pytest.raises(ValueError, match="outside the channel folder"):
        stage_channels(plan, hosts, tmp_path / "staging")
    assert not (tmp_path / "outside.txt").exists()


def test_code_is_copied_without_caches_or_the_jobs_folder(tmp_path):
    src = tmp_path / "project"
    (src / "__pycache__").mkdir(parents=True)
    (src / "__pycache__" / "x.pyc").write_bytes(b"")
    (src / "train.py").write_text("print(1)")
    jobs = src / ".smdist" / "jobs"
    jobs.mkdir(parents=True)
    (src / "lib").mkdir()
    (src / "lib" / "util.py").write_text("")
    hosts = _hosts(tmp_path)
    plan = tiny_plan(source_dir="project")
    stage_code(src, hosts, keep_out=jobs)
    for paths in hosts.values():
        names = sorted(p.relative_to(paths.code_dir).as_posix() for p in paths.code_dir.rglob("*"))
        assert names == ["lib", "lib/util.py", "train.py"]
    assert local_code_source(plan) == Path.cwd() / "project"
    assert local_code_source(tiny_plan(source_dir="s3://b/src.tar.gz")) is None


def test_code_source_comes_from_the_submission_when_it_knows(tmp_path: Path) -> None:
    from smdist_launcher.backends.api import Code, Submission
    from smdist_launcher.backends.toolkit.staging import prepare_local_run

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    submission = Submission(plan=tiny_plan(source_dir="."), code=Code(source=elsewhere))
    assert prepare_local_run(submission)[1].source == elsewhere  # not the working directory


def test_dependencies_are_staged_next_to_the_code_like_sagemaker(tmp_path: Path) -> None:
    from smdist_launcher import PyTorch
    from smdist_launcher.backends.toolkit.staging import prepare_local_run

    src, lib = tmp_path / "src", tmp_path / "shared" / "mylib"
    src.mkdir()
    (src / "train.py").write_text("import mylib, helpers\n")
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text("")
    (tmp_path / "shared" / "helpers.py").write_text("")
    est = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=2,
                  framework_version="2.3", py_version="py311",
                  dependencies=[str(lib), str(tmp_path / "shared" / "helpers.py")])
    plan, code = prepare_local_run(est.submission(est.plan()))
    hosts = _hosts(tmp_path)
    stage_code(code, hosts, keep_out=tmp_path / "jobs")
    for paths in hosts.values():
        names = sorted(p.relative_to(paths.code_dir).as_posix() for p in paths.code_dir.rglob("*"))
        assert names == ["helpers.py", "mylib", "mylib/__init__.py", "train.py"]
    missing = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=1,
                      framework_version="2.3", py_version="py311", dependencies=[str(tmp_path / "nope")])
    with pytest.raises(FileNotFoundError, match="dependencies: .*nope does not exist"):
        prepare_local_run(missing.submission(missing.plan()))


def test_relative_checkpoint_folder_is_read_from_the_job_file_folder(tmp_path: Path, monkeypatch) -> None:
    # restore (launcher) and save (Slurm's finisher runs in the job folder) must reach the same folder
    from smdist_launcher.backends.toolkit.staging import prepare_local_run
    from smdist_launcher.estimators import estimator_from_job_file

    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("print('hi')\n")
    for uri in ("file://ckpt/run1", "ckpt/run1"):
        (project / "job.yaml").write_text(
            "framework: pytorch\nentry_point: train.py\ninstance_type: local\ninstance_count: 1\n"
            f"framework_version: '2.3'\npy_version: py311\ncheckpoint_s3_uri: {uri}\n")
        monkeypatch.chdir(tmp_path)  # elsewhere: the job file's folder counts, as for its inputs
        est = estimator_from_job_file(str(project / "job.yaml"))
        plan, _ = prepare_local_run(est.submission(est.plan(job_name="j")))
        assert plan.checkpoint_s3_uri == (project / "ckpt" / "run1").as_uri()
    absolute = tiny_plan(checkpoint_s3_uri=(tmp_path / "abs").as_uri())
    assert prepare_local_run(est.submission(absolute))[0].checkpoint_s3_uri == (tmp_path / "abs").as_uri()


def test_a_container_command_gets_its_own_copy_of_each_channel(tmp_path):
    """As on SageMaker: SDK v3's sm_train.sh chmods a file of its sm_drivers channel; no host may change another's."""
    src = _data(tmp_path)
    hosts = _hosts(tmp_path)
    _prepare(hosts, ["sm_drivers"])
    plan = tiny_plan(channels={"sm_drivers": f"file://{src}"}).model_copy(update={"launcher": "container_command"})
    stage_channels(plan, hosts, tmp_path / "staging")
    first, second = (paths.channel_dir("sm_drivers") for paths in hosts.values())
    assert not first.is_symlink() and (first / "sub" / "d.txt").read_text() == "sub/d.txt"
    (first / "a.txt").chmod(0o755)
    (first / "a.txt").write_text("changed on algo-1")
    assert (second / "a.txt").read_text() == "a.txt" and (src / "a.txt").read_text() == "a.txt"


# ---- staging into a host folder the job owns (a retry, serve --run-as): no planted link is followed (issue 28) ----
def _owned_host(tmp_path: Path) -> tuple[dict[str, MLPaths], Path]:
    paths = MLPaths(tmp_path / "job" / "hosts" / "algo-1" / "opt" / "ml")
    paths.channel_dir("training").mkdir(parents=True)
    paths.code_dir.mkdir()
    outside = tmp_path / "outside"
    (outside / "ml" / "code").mkdir(parents=True)
    (outside / "ml" / "code" / "keep.py").write_text("root's")
    (outside / "training").write_text("root's file")
    return {"algo-1": paths}, outside


def _tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): (p.read_text() if p.is_file() else "/")
            for p in sorted(folder.rglob("*"))}


def test_code_staging_removes_and_writes_nothing_through_a_planted_link(tmp_path):
    hosts, outside = _owned_host(tmp_path)
    src = tmp_path / "project"
    src.mkdir()
    (src / "train.py").write_text("print(1)")
    before = _tree(outside)
    host = tmp_path / "job" / "hosts" / "algo-1"
    (host / "opt").rename(host / "old")
    (host / "opt").symlink_to(outside)  # opt -> outside: opt/ml/code is outside/ml/code
    with pytest.raises(NotADirectoryError):
        stage_code(src, hosts, keep_out=tmp_path / "jobs")
    assert _tree(outside) == before
    (host / "opt").unlink()
    (host / "old").rename(host / "opt")
    (host / "opt" / "ml" / "code" / "planted").symlink_to(outside / "ml" / "code")
    stage_code(src, hosts, keep_out=tmp_path / "jobs")  # code/ replaced as a whole, links and all
    assert _tree(hosts["algo-1"].code_dir) == {"train.py": "print(1)"} and _tree(outside) == before
    assert not list((tmp_path / "job" / "hosts").glob(".smdist-staging-*"))


def test_channel_staging_removes_and_writes_nothing_through_a_planted_link(tmp_path):
    hosts, outside = _owned_host(tmp_path)
    src = _data(tmp_path)
    before = _tree(outside)
    data = hosts["algo-1"].input_data_dir
    data.rename(tmp_path / "moved")
    data.symlink_to(outside)  # input/data -> outside: the channel slot is outside/training
    plan = tiny_plan(1, channels={"training": str(src)})
    with pytest.raises(NotADirectoryError):
        stage_channels(plan, hosts, tmp_path / "job" / "staging")
    copies = plan.model_copy(update={"launcher": "container_command"})
    with pytest.raises(NotADirectoryError):
        stage_channels(copies, hosts, tmp_path / "job" / "staging")
    assert _tree(outside) == before and sorted(p.name for p in outside.iterdir()) == ["ml", "training"]
