"""The smddp backend end to end: real processes, real gloo (CPU) and NCCL + NVLink (GPU)."""
from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.slow


def _gpus() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def test_every_collective_dtype_op_on_2_ranks(run_ranks) -> None:
    log = run_ranks("collectives", 2)
    assert log.count("checks passed on cpu") == 2


def test_every_collective_on_4_ranks_and_subgroups(run_ranks) -> None:
    log = run_ranks("collectives", 4)
    assert "rank 1: 436 checks passed" in log  # rank 1 is in subgroup [1, 3]: both passes ran


def test_ddp_fsdp2_and_functional_collectives_train_over_smddp(run_ranks) -> None:
    log = run_ranks("ddp,fsdp2,funcol", 2)
    assert log.count("DDP smddp == gloo") == 2
    assert log.count("FSDP2 over smddp matches the reference") == 2
    assert log.count("functional collectives over smddp ok") == 2


@pytest.mark.gpu
@pytest.mark.parametrize("world_size", [2, 4])
def test_gpu_matches_nccl(run_ranks, monkeypatch, world_size: int) -> None:
    """The CPU matrix on CUDA tensors, every fast path forced against NCCL (smddp's Lamport
    kernel included), DDP/FSDP2/funcol: one launch per world size (process and NCCL start-up
    dominate on the device)."""
    if _gpus() < world_size:
        pytest.skip(f"needs {world_size} CUDA GPUs, found {_gpus()}")
    monkeypatch.setenv("SMDDP_LAMPORT_BYTES", str(8 << 20))  # forced Lamport calls up to 8 MiB, any group size
    monkeypatch.setenv("SMDDP_LAMPORT_TIMEOUT_S", "30")  # a lost peer store fails the test, not hangs it
    log = run_ranks("lamport,collectives,fast_paths,ddp,fsdp2,funcol,native,reinit", world_size, device="cuda",
                    timeout=300)
    assert log.count("lamport checks equal NCCL") == world_size
    assert log.count("lamport after re-init ok") == world_size
    assert log.count("fast-path checks equal NCCL") == world_size
    assert log.count("DDP smddp == nccl") == world_size
    assert log.count("native-backend checks equal NCCL") == world_size


@pytest.mark.gpu
def test_gpu_lamport_lost_peer_stops_with_a_message(run_ranks, monkeypatch) -> None:
    """A rank whose peer skips a Lamport AllReduce stops after SMDDP_LAMPORT_TIMEOUT_S with a
    device-side assert naming the timeout (not a hang, not a bare launch failure) and still
    tears its group down."""
    if _gpus() < 2:
        pytest.skip(f"needs 2 CUDA GPUs, found {_gpus()}")
    monkeypatch.setenv("SMDDP_LAMPORT_BYTES", str(1 << 20))
    monkeypatch.setenv("SMDDP_LAMPORT_TIMEOUT_S", "2")
    log = run_ranks("lamport_timeout", 2, device="cuda", timeout=90)
    assert "rank 0: the lost peer stopped the context" in log
    assert "a peer did not arrive in time (SMDDP_LAMPORT_TIMEOUT_S)" in log
    assert "rank 0: torn down after the timeout" in log


@pytest.mark.gpu
def test_gpu_python_group_fallback_matches_nccl(run_ranks, monkeypatch) -> None:
    """With the native backend off (SMDDP_NATIVE_BACKEND=0, as without a compiler) the Python
    process group serves CUDA tensors, fast paths included, and still equals NCCL."""
    if _gpus() < 2:
        pytest.skip(f"needs 2 CUDA GPUs, found {_gpus()}")
    monkeypatch.setenv("SMDDP_NATIVE_BACKEND", "0")
    log = run_ranks("collectives,fast_paths,ddp", 2, device="cuda", timeout=300)
    assert log.count("fast-path checks equal NCCL") == 2


SEED_SCRIPT = """
import smdistributed.dataparallel.torch.torch_smddp  # the seed documents' import
import torch, torch.distributed as dist
dist.init_process_group(backend="smddp")
t = torch.ones(3) * (dist.get_rank() + 1)
dist.all_reduce(t)
assert dist.get_backend() == "smddp" and t.tolist() == [3.0, 3.0, 3.0], t
print("seed ok", dist.get_rank())
dist.destroy_process_group()
"""


def test_seed_two_line_change_runs_with_env_init(tmp_path) -> None:
    """`import smdistributed.dataparallel.torch.torch_smddp` + init_process_group("smddp") over env://."""
    import os
    import socket
    import subprocess
    import sys
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src"
    shim = src / "smdist_launcher" / "compat" / "site"
    if not (shim / "smdistributed").is_dir():
        pytest.skip("the smdistributed import shim (helper C's compat/site) is not in this tree")
    script = tmp_path / "train.py"
    script.write_text(SEED_SCRIPT)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = dict(os.environ, PYTHONPATH=f"{src}{os.pathsep}{shim}", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                WORLD_SIZE="2")
    procs = [subprocess.Popen([sys.executable, "-W", "ignore", str(script)],
                              env={**base, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert all("seed ok" in o for o in outs)
