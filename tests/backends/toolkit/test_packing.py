"""backends/toolkit/packing.py and the outputs it delivers (issue 32): compression off delivers the merged model and
output folders as folders (SageMaker's `output/model/...`), on every local backend through the job folder's settings;
the archive is streamed with a fast deflate, never followed through a planted link, and a stop mid-way leaves no
truncated archive under the final name and the hosts' folders as they were."""
from __future__ import annotations

import gzip
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from smdist_launcher import ModelTrainer, PyTorch
from smdist_launcher.backends.toolkit import packing
from smdist_launcher.backends.toolkit.output_settings import Compression, OutputSettings
from smdist_launcher.backends.toolkit.outputs import collect_outputs
from smdist_launcher.backends.toolkit.packing import Folder, PackingStopped, pack
from smdist_launcher.contract import MLPaths
from smdist_launcher.train.configs import Compute, OutputDataConfig, SourceCode

from ..plans import tiny_plan
from .packing_trees import random_model, stop_at_second_report


def _job(tmp_path: Path, compression: Compression) -> tuple[Path, dict[str, MLPaths]]:
    job = tmp_path / "job"
    job.mkdir()
    OutputSettings(compression).save(job)
    hosts = {h: MLPaths(job / "hosts" / h / "opt" / "ml") for h in ("algo-1", "algo-2")}
    for i, paths in enumerate(hosts.values()):
        (paths.model_dir / "shards").mkdir(parents=True)
        paths.output_data_dir.mkdir(parents=True)
        (paths.model_dir / "config.json").write_text(f"from host {i + 1}")
        (paths.model_dir / "shards" / f"part-{i}.bin").write_bytes(os.urandom(1000))
    (hosts["algo-1"].output_data_dir / "eval.json").write_text("{}")
    return job, hosts


def test_compression_off_delivers_the_folders_as_they_are(tmp_path: Path) -> None:
    job, hosts = _job(tmp_path, Compression.NONE)
    (hosts["algo-2"].model_dir / "planted").symlink_to("/etc/hostname")
    model, output = collect_outputs(tiny_plan(), hosts, job / "output")
    assert model == (job / "output" / "model").as_uri() + "/"
    assert output == (job / "output" / "data").as_uri() + "/"
    files = sorted(p.relative_to(job / "output").as_posix() for p in (job / "output").rglob("*") if p.is_file())
    assert files == ["data/eval.json", "model/config.json", "model/shards/part-0.bin", "model/shards/part-1.bin"]
    assert (job / "output" / "model" / "config.json").read_text() == "from host 2"  # a later host wins
    assert not list((job / "output").glob("*.tar.gz"))
    # with an output_path: <output_path>/<job>/output/model/ as SageMaker lays it out
    model, _ = collect_outputs(tiny_plan(output_path=f"file://{tmp_path}/results"), hosts, job / "output")
    assert model == (tmp_path / "results" / "tiny" / "output" / "model").as_uri() + "/"
    assert (tmp_path / "results" / "tiny" / "output" / "model" / "shards" / "part-1.bin").is_file()


@pytest.mark.parametrize("make", ["v2", "v3"])
def test_the_sdk_arguments_reach_the_job_folder(tmp_path: Path, make: str) -> None:
    (tmp_path / "train.py").write_text("print('hi')\n")
    if make == "v2":
        est = PyTorch(entry_point="train.py", source_dir=str(tmp_path), instance_type="local", instance_count=1,
                      framework_version="2.3", py_version="py311", disable_output_compression=True)
    else:
        est = ModelTrainer(training_image="smdist-train:latest", compute=Compute(instance_type="local"),
                           source_code=SourceCode(source_dir=str(tmp_path), entry_script="train.py"),
                           output_data_config=OutputDataConfig(compression_type="NONE"))
    settings = OutputSettings.of(est.submission(est.plan()).settings if make == "v2" else est.spec)
    assert settings.compression is Compression.NONE
    settings.save(tmp_path)
    assert OutputSettings.load(tmp_path) == settings
    assert OutputSettings.load(tmp_path / "nowhere").compression is Compression.GZIP  # SageMaker's default


def test_the_archive_streams_every_file_and_no_planted_link(tmp_path: Path) -> None:
    job, hosts = _job(tmp_path, Compression.GZIP)
    model = hosts["algo-1"].model_dir
    (model / "link-to-file").symlink_to("/etc/hostname")
    (model / "link-to-dir").symlink_to("/etc")
    os.mkfifo(model / "fifo")  # would block a reader forever
    collect_outputs(tiny_plan(), hosts, job / "output")
    with tarfile.open(job / "output" / "model.tar.gz") as tar:
        names = sorted(tar.getnames())
    assert names == ["config.json", "shards/part-0.bin", "shards/part-1.bin"]
    with gzip.open(job / "output" / "model.tar.gz") as gz:  # a plain gzip stream, whichever deflate wrote it
        assert len(gz.read()) > 2000
    assert not (job / "output" / "model.tar.gz.partial").exists()
    # a host whose whole model folder is a planted link: nothing of it is packed, nor even measured
    shutil.rmtree(hosts["algo-2"].model_dir)
    hosts["algo-2"].model_dir.symlink_to("/etc")
    assert packing.total_bytes([Folder(job / "hosts" / "algo-2", Path("opt/ml/model"))]) == 0
    collect_outputs(tiny_plan(), {"algo-2": hosts["algo-2"]}, job / "output2")
    assert not (job / "output2" / "model.tar.gz").exists()


def test_the_fast_deflate_is_used_where_installed() -> None:
    pytest.importorskip("isal")  # the `pack` extra: bootstrap installs it
    assert packing.compressor() == "isal"


def test_a_stop_while_packing_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = random_model(tmp_path, 3 << 20)
    said, stop_after_first_report = stop_at_second_report(monkeypatch)
    out = tmp_path / "out" / "model.tar.gz"
    with pytest.raises(PackingStopped) as stopped:
        pack([Folder(src)], out, progress=stop_after_first_report, threads=1)
    assert "packing model.tar.gz" in said[0] and " of " in said[0]
    assert "SIGTERM" in str(stopped.value) and "model.tar.gz.partial" in str(stopped.value)
    assert not out.exists()  # never a truncated archive under the final name
    assert stopped.value.partial == out.with_name("model.tar.gz.partial") and stopped.value.partial.stat().st_size
    assert sorted(p.name for p in src.iterdir()) == ["w0.bin", "w1.bin", "w2.bin"]  # the folder as it was


def test_serve_requests_with_compression_none_reach_the_settings() -> None:
    """CreateTrainingJob's OutputDataConfig.CompressionType NONE, as serve reads it: a v2-style request (the estimator's
    arguments) and an SDK v3 container-command request (its ContainerCommandJob)."""
    from smdist_launcher.backends.sagemaker.attach import attached_arguments
    from smdist_launcher.serve.container_jobs import container_job

    none = {"OutputDataConfig": {"S3OutputPath": "s3://bucket/out", "CompressionType": "NONE"}}
    assert attached_arguments(none)["disable_output_compression"] is True
    assert "disable_output_compression" not in attached_arguments({"OutputDataConfig": {"CompressionType": "GZIP"}})
    request = {"TrainingJobName": "j", "AlgorithmSpecification": {
        "TrainingImage": "img", "TrainingInputMode": "File", "ContainerEntrypoint": ["/bin/bash"]},
        "ResourceConfig": {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1}, **none}
    assert OutputSettings.of(container_job(request)).compression is Compression.NONE


def test_a_full_disk_while_packing_gives_the_space_back(tmp_path: Path) -> None:
    """The disk fills while model.tar.gz (or the uncompressed model/ folder) is written: PackingStopped names the
    full disk, nothing is left under the final name, and the part written is removed (it is only a copy of the hosts'
    folders, kept as they were), so the job's record and logs still fit (before: the .partial stayed, and a full disk
    at the archive's last buffer raised a bare OSError)."""
    from .small_disk import on_small_disk

    found = on_small_disk(tmp_path, '''
from smdist_launcher.backends.toolkit.packing import Folder, PackingStopped, copy_merged, pack
(disk / "model").mkdir()
(disk / "model" / "w.bin").write_bytes(os.urandom(160 << 10))
out = {}
for name, do in (("model.tar.gz", pack), ("model", copy_merged)):  # the disk fills while they are written ...
    try:
        do([Folder(disk / "model")], disk / "out" / name)
        out[name] = "delivered"
    except PackingStopped as exc:
        out[name] = str(exc)
fill()  # ... or is full before they start
for name, do in (("model.tar.gz", pack), ("model", copy_merged)):
    try:
        do([Folder(disk / "model")], disk / "out" / name)
        out["full " + name] = "delivered"
    except PackingStopped as exc:
        out["full " + name] = str(exc)
out["left"] = sorted(p.name for p in (disk / "out").iterdir())
out["size"] = os.path.getsize(disk / "model" / "w.bin")
print(json.dumps(out))
''')
    for name in ("model.tar.gz", "model", "full model.tar.gz", "full model"):
        assert "No space left on device" in found[name] and "was removed" in found[name], name
    assert found["left"] == [] and found["size"] == 160 << 10
