"""DCP checkpoints on S3 (torch.sagemaker.distributed.checkpoint.s3_filesystem) against a real moto server."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch import nn

from smdist_launcher.smp.distributed.checkpoint import state_dict_loader, state_dict_saver
from smdist_launcher.smp.distributed.checkpoint.s3_filesystem import S3FileSystemReader, S3FileSystemWriter
from smp.multiprocess import torchrun


def _keys(s3, prefix: str) -> set[str]:
    listing = s3.list_objects_v2(Bucket=s3.bucket, Prefix=prefix + "/")
    return {obj["Key"][len(prefix) + 1:] for obj in listing.get("Contents", [])}


def _trained(seed: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optim = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.randn(3, 4)).sum().backward()
    optim.step()  # Adam now holds exp_avg / exp_avg_sq / step per parameter
    return model, optim


def _state(model: nn.Module, optim: torch.optim.Optimizer) -> dict:
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(model, [optim])
    return {"model": model_sd, "optim": optim_sd, "step": torch.tensor(7)}


def _assert_same(a, b) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _assert_same(a[key], b[key])
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    else:
        assert a == b


@pytest.mark.parametrize("mode", ["save", "async_save", "smp_async_save"])
def test_model_and_optimizer_round_trip(s3, tmp_path: Path, mode: str) -> None:
    uri = f"s3://{s3.bucket}/ckpt/{mode}/step-7"
    model, optim = _trained(0)
    saved = _state(model, optim)
    writer = S3FileSystemWriter(uri, staging_dir=str(tmp_path), thread_count=2)
    if mode == "save":
        dcp.save(saved, storage_writer=writer)
    elif mode == "async_save":
        dcp.async_save(saved, storage_writer=writer).result()
    else:  # AWS's documented form: torch.sagemaker's saver given the s3:// URI as checkpoint_id
        state_dict_saver.async_save(saved, checkpoint_id=uri)
        assert state_dict_saver.maybe_finalize_async_calls(blocking=True) == 0
    assert {".metadata", "__0_0.distcp"} <= _keys(s3, f"ckpt/{mode}/step-7")
    assert list(tmp_path.iterdir()) == []  # staging folder gone after the upload

    other_model, other_optim = _trained(1)
    loaded = _state(other_model, other_optim)
    loaded["step"] = torch.tensor(0)
    if mode == "smp_async_save":
        state_dict_loader.load(loaded, checkpoint_id=uri)
    else:
        dcp.load(loaded, storage_reader=S3FileSystemReader(uri, staging_dir=str(tmp_path)))
    _assert_same(saved, loaded)
    assert list(tmp_path.iterdir()) == []


def test_errors_name_the_uri(s3) -> None:
    with pytest.raises(ValueError, match="'/tmp/x' is not an s3:// URI"):
        S3FileSystemWriter("/tmp/x")
    with pytest.raises(ValueError, match="bucket name 'Bad_Bucket'"):
        S3FileSystemReader("s3://Bad_Bucket/key")
    with pytest.raises(dcp.CheckpointException,
                       match="s3://no-such-bucket-here/k: bucket 'no-such-bucket-here' does not exist"):
        dcp.save({"x": torch.ones(2)}, storage_writer=S3FileSystemWriter("s3://no-such-bucket-here/k"))
    # The reader checks at once: torch 2.11's load would swallow read_metadata's error into "metadata is None".
    with pytest.raises(FileNotFoundError, match=f"no DCP checkpoint at s3://{s3.bucket}/never/saved: "
                                                f"s3://{s3.bucket}/never/saved/.metadata does not exist"):
        S3FileSystemReader(f"s3://{s3.bucket}/never/saved")
    with pytest.raises(FileNotFoundError, match="bucket 'no-such-bucket-here' does not exist"):
        S3FileSystemReader("s3://no-such-bucket-here/k")
    with pytest.raises(dcp.CheckpointException, match="already exists .* and overwrite=False"):
        dcp.save({"x": torch.ones(2)}, storage_writer=S3FileSystemWriter(f"s3://{s3.bucket}/once"))
        dcp.save({"x": torch.ones(2)}, storage_writer=S3FileSystemWriter(f"s3://{s3.bucket}/once", overwrite=False))


def test_without_boto3_the_module_imports_and_a_writer_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)  # `import boto3` now raises ImportError, as on the GPU image
    with pytest.raises(ImportError, match="needs boto3"):
        S3FileSystemWriter("s3://bucket/key")


WORKER = textwrap.dedent('''
    import json, os, sys
    import torch, torch.distributed as dist, torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    from smdist_launcher.smp.distributed.checkpoint.s3_filesystem import S3FileSystemReader, S3FileSystemWriter

    dist.init_process_group("gloo")
    rank, base = dist.get_rank(), sys.argv[1]
    mesh = init_device_mesh("cpu", (2,))
    full = torch.arange(24, dtype=torch.float32).reshape(8, 3)
    state = {"w": distribute_tensor(full, mesh, [Shard(0)]), f"own{rank}": torch.full((2,), float(rank))}
    dcp.save(state, storage_writer=S3FileSystemWriter(base + "/sync"))
    dcp.async_save(state, storage_writer=S3FileSystemWriter(base + "/async")).result()
    ok = {}
    for name in ("sync", "async"):
        back = {"w": distribute_tensor(torch.zeros(8, 3), mesh, [Shard(0)]), f"own{rank}": torch.zeros(2)}
        dcp.load(back, storage_reader=S3FileSystemReader(f"{base}/{name}"))
        ok[name] = torch.equal(back["w"].full_tensor(), full) and torch.equal(back[f"own{rank}"], state[f"own{rank}"])
    # one write: both ranks share the pipe, and print's separate newline write can interleave
    os.write(1, ("RESULT " + json.dumps({"check": f"rank{rank}", **ok}) + "\\n").encode())
    dist.destroy_process_group()
    # as every rank under smdist-train ends (container/rank_entry.py): a gloo worker thread that drops its last work
    # during interpreter finalization aborts the process (docs/exit-abort.md); this ends it before finalization
    from smdist_launcher.container.rank_entry import finish
    finish(0)
''')


def test_two_ranks_gloo_sync_and_async(s3, tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    rows, _ = torchrun(script, 2, [f"s3://{s3.bucket}/run"])
    assert rows == {f"rank{r}": {"check": f"rank{r}", "sync": True, "async": True} for r in (0, 1)}
    for name in ("sync", "async"):  # each rank uploaded its own shard file; the coordinator the metadata
        assert _keys(s3, f"run/{name}") == {".metadata", "__0_0.distcp", "__1_0.distcp"}
