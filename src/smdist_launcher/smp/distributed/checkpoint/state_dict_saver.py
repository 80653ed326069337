"""``torch.sagemaker.distributed.checkpoint.state_dict_saver``: save / async_save / maybe_finalize_async_calls, and
``PyTorchDistSaveShardedStrategy`` (what ``async_save(..., sharded_strategy=...)`` takes)."""
from __future__ import annotations

from typing import Any

from ...dcp_io import async_save, maybe_finalize_async_calls, save


class PyTorchDistSaveShardedStrategy:
    """SMP's async save strategy (Megatron-Core's ``TorchDistSaveShardedStrategy`` for SMP's checkpoints).

    Here it configures ``async_save(..., sharded_strategy=s)``: ``thread_count`` writer threads per rank (DCP's
    FileSystemWriter) for a checkpoint directory. The other options are Megatron's planning knobs and are kept
    only as attributes. Saving Megatron's own sharded state dicts through the strategy (``s.save`` /
    ``s.async_save``) is not implemented.
    """

    def __init__(self, backend: str = "torch_dist", version: int = 1, keep_only_main_replica: bool = True,
                 thread_count: int = 2, cached_metadata: bool = False, separation_hint: str | None = None,
                 **_: Any) -> None:
        if int(thread_count) < 1:
            raise ValueError(f"PyTorchDistSaveShardedStrategy: thread_count must be >= 1, got {thread_count!r}")
        self.backend = backend
        self.version = version
        self.keep_only_main_replica = keep_only_main_replica
        self.thread_count = int(thread_count)
        self.cached_metadata = cached_metadata
        self.separation_hint = separation_hint

    def _megatron_api(self, name: str) -> NotImplementedError:
        return NotImplementedError(
            f"PyTorchDistSaveShardedStrategy.{name}: saving Megatron-Core sharded state dicts through the strategy "
            "is not implemented by smdist-launcher; pass the strategy to torch.sagemaker.distributed.checkpoint."
            "state_dict_saver.async_save(state_dict, checkpoint_id=..., sharded_strategy=strategy) instead")

    def save(self, *args: Any, **kwargs: Any) -> Any:
        raise self._megatron_api("save")

    def async_save(self, *args: Any, **kwargs: Any) -> Any:
        raise self._megatron_api("async_save")


__all__ = ["PyTorchDistSaveShardedStrategy", "async_save", "maybe_finalize_async_calls", "save"]
