"""The SMP v2 names AWS's shared training scripts import (amazon-sagemaker-examples
build_and_train_models/sm-distributed_model_parallel_v2/shared-scripts: train_lib.py, train_utils.py,
checkpoints.py), imported as a job does, and what they do: AsyncCallsQueue, PyTorchDistSaveShardedStrategy, MoELayer.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from smdist_launcher.compat import SITE_DIR
from smdist_launcher.smp.distributed.checkpoint.async_utils import AsyncCallsQueue, AsyncRequest

from .multiprocess import torchrun

WORKER = Path(__file__).with_name("v2_async_queue_worker.py")

# the scripts' own import lines (train_lib.py:70, checkpoints.py:31, train_utils.py:465)
SCRIPT_IMPORTS = """
from torch.sagemaker.distributed.checkpoint.async_utils import AsyncCallsQueue
from torch.sagemaker.distributed.checkpoint.state_dict_saver import PyTorchDistSaveShardedStrategy, async_save
from torch.sagemaker.moe.moe_layer import MoELayer
import torch
print(AsyncCallsQueue.__module__, PyTorchDistSaveShardedStrategy.__module__, MoELayer.__module__)
# train_utils.py: check_fn_moe = lambda submodule: isinstance(submodule, MoELayer)
print("moe", isinstance(torch.nn.Linear(2, 2), MoELayer))
try:
    MoELayer()
except NotImplementedError as e:
    print("refused", e)
"""


def _job_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter with the compat site dir on PYTHONPATH, as the runtime starts user processes."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(SITE_DIR), src])})


def test_the_shared_scripts_imports_resolve_under_the_compat_site(tmp_path: Path) -> None:
    r = _job_python(SCRIPT_IMPORTS, tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == ("smdist_launcher.smp.distributed.checkpoint.async_utils "
                        "smdist_launcher.smp.distributed.checkpoint.state_dict_saver smdist_launcher.smp.moe.moe_layer")
    assert lines[1] == "moe False"  # no module is an SMP MoE layer: tsm.transform does not make them
    assert lines[2].startswith("refused torch.sagemaker.moe.moe_layer.MoELayer: SMP's expert-parallel MoE layer is "
                               "not implemented by smdist-launcher")


def test_a_name_the_compat_layer_lacks_is_not_called_a_broken_installation(tmp_path: Path) -> None:
    r = _job_python("import torch.sagemaker.moe.moe_router", tmp_path)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert ("ImportError: cannot import torch.sagemaker.moe.moe_router: torch.sagemaker.moe.moe_router is not "
            "provided by smdist-launcher's compatibility layer for the SMP v2 API") in last, last
    assert "its modules under torch.sagemaker.moe are: moe_config, moe_layer;" in last
    assert "incomplete" not in last and "reinstall" not in last


def test_a_module_missing_from_the_installation_still_says_reinstall(monkeypatch: pytest.MonkeyPatch) -> None:
    from smdist_launcher.compat import aliases

    target = "smdist_launcher.smp.moe.moe_router"
    error = ModuleNotFoundError(f"No module named {target!r}", name=target)
    assert aliases.not_provided("torch.sagemaker.moe.moe_router", target, "the SMP v2 API", error) is not None
    # the installation's file list names it, so the file was lost: the reinstall advice stays
    monkeypatch.setattr(aliases, "_listed_in_installation", lambda module: module == target)
    assert aliases.not_provided("torch.sagemaker.moe.moe_router", target, "the SMP v2 API", error) is None
    # a module the target itself imports (not on the requested path) is missing: also the installation's fault
    inner = ModuleNotFoundError("No module named 'smdist_launcher.smp.gone'", name="smdist_launcher.smp.gone")
    assert aliases.not_provided("torch.sagemaker.moe", "smdist_launcher.smp.moe", "the SMP v2 API", inner) is None
    # the alias's own root missing is a broken installation too
    root = ModuleNotFoundError("No module named 'smdist_launcher.smp'", name="smdist_launcher.smp")
    assert aliases.not_provided("torch.sagemaker", "smdist_launcher.smp", "the SMP v2 API", root) is None


# ---- AsyncCallsQueue on CPU -----------------------------------------------------------------------------------------
def test_calls_run_in_the_background_and_finalize_in_order() -> None:
    queue = AsyncCallsQueue()
    gate = threading.Event()
    log: list[str] = []
    main = threading.current_thread()
    threads: list[threading.Thread] = []

    def work(tag: str) -> None:
        threads.append(threading.current_thread())
        if tag == "a":
            gate.wait(10)
        log.append(f"run {tag}")

    a = queue.schedule_async_request(AsyncRequest(work, ("a",), [lambda: log.append("final a")]))
    b = queue.schedule_async_request(AsyncRequest(work, ("b",), [lambda: log.append("final b")]))
    assert (a, b) == (0, 1) and queue.get_num_unfinalized_calls() == 2
    assert queue.maybe_finalize_async_calls(blocking=False) == []  # a still runs: nothing finalizes before it
    gate.set()
    assert queue.maybe_finalize_async_calls(blocking=True) == [0, 1]
    assert log == ["run a", "run b", "final a", "final b"]
    assert threads and all(t is not main for t in threads)
    assert queue.get_num_unfinalized_calls() == 0
    queue.close()


def test_non_blocking_finalizes_the_finished_prefix_only() -> None:
    queue = AsyncCallsQueue()
    queue.schedule_async_request(AsyncRequest(None, (), []))  # Megatron's no-op request
    gate = threading.Event()
    queue.schedule_async_request(AsyncRequest(gate.wait, (10,), []))
    deadline = time.monotonic() + 10
    done: list[int] = []
    while not done and time.monotonic() < deadline:
        done = queue.maybe_finalize_async_calls()
    assert done == [0] and queue.get_num_unfinalized_calls() == 1
    gate.set()
    queue.close()
    assert queue.get_num_unfinalized_calls() == 0


def test_a_failed_background_call_is_raised_at_finalize_and_leaves_the_queue() -> None:
    queue = AsyncCallsQueue()
    finalized: list[str] = []

    def fail() -> None:
        raise OSError("disk full")

    queue.schedule_async_request(AsyncRequest(fail, (), [lambda: finalized.append("x")]))
    queue.schedule_async_request(AsyncRequest(lambda: None, (), [lambda: finalized.append("ok")]))
    with pytest.raises(OSError, match="disk full"):
        queue.maybe_finalize_async_calls(blocking=True)
    assert finalized == []  # the failed call's finalizers do not run
    assert queue.maybe_finalize_async_calls(blocking=True) == [1] and finalized == ["ok"]
    queue.close()
    with pytest.raises(RuntimeError, match="closed"):
        queue.schedule_async_request(AsyncRequest(lambda: None, (), []))


def test_two_threads_finalizing_take_each_call_once_and_in_order() -> None:
    queue = AsyncCallsQueue()
    gate = threading.Event()
    finalized: list[int] = []
    for i in range(3):
        queue.schedule_async_request(AsyncRequest(gate.wait, (10,), [lambda i=i: finalized.append(i)]))
    errors: list[BaseException] = []
    results: list[list[int]] = []

    def finalize() -> None:
        try:
            results.append(queue.maybe_finalize_async_calls(blocking=True))
        except Exception as exc:  # noqa: BLE001 - before: IndexError (pop from an empty deque) in one or both
            errors.append(exc)

    threads = [threading.Thread(target=finalize) for _ in range(2)]
    for t in threads:
        t.start()
        time.sleep(0.2)  # both are in maybe_finalize_async_calls while the calls still run
    gate.set()
    for t in threads:
        t.join(10)
    assert errors == [] and finalized == [0, 1, 2]
    assert sorted(results) == [[], [0, 1, 2]]
    queue.close()
    queue.close()  # twice: nothing left to do


def test_a_frozen_request_keeps_its_own_finalizers() -> None:
    shared: list = []
    request = AsyncRequest(None, (), shared)
    frozen = request.freeze()
    with pytest.raises(RuntimeError, match="frozen"):
        frozen.add_finalize_fn(lambda: None)
    request.add_finalize_fn(lambda: None)
    assert len(frozen.finalize_fns) == 0


def test_the_strategy_checks_its_threads_and_refuses_megatron_state_dicts() -> None:
    from smdist_launcher.smp.distributed.checkpoint.state_dict_saver import PyTorchDistSaveShardedStrategy

    assert PyTorchDistSaveShardedStrategy("torch_dist", 1, thread_count=4).thread_count == 4
    with pytest.raises(ValueError, match="thread_count"):
        PyTorchDistSaveShardedStrategy(thread_count=0)
    with pytest.raises(NotImplementedError, match="Megatron-Core sharded state dicts"):
        PyTorchDistSaveShardedStrategy().save({}, "/tmp/x")


@pytest.mark.slow
def test_async_save_through_the_scripts_queue_on_two_ranks(tmp_path: Path) -> None:
    rows, _ = torchrun(WORKER, 2, [str(tmp_path)])
    for row in rows["queue"]["ranks"]:
        assert row["finalized"] == [0, 1] and row["left"] == 0
        assert row["unfinalized_after_save"][0] == 1  # async_save(queue=...) put its call on the script's queue
        assert row["exact1"] and row["exact2"]
    files1, files2 = rows["queue"]["ranks"][0]["files1"], rows["queue"]["ranks"][0]["files2"]
    assert len(files1) == 2  # one file per rank: DCP's default writer
    assert len(files2) == 6  # thread_count=3 from the strategy: three files per rank

