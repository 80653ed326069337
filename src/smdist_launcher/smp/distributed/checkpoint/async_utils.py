"""``torch.sagemaker.distributed.checkpoint.async_utils``: ``AsyncCallsQueue`` (and ``AsyncRequest``).

SMP v2 re-exports Megatron-Core's queue of background checkpoint calls; AWS's SMP v2 shared training scripts make
one (``AsyncCallsQueue()``), hand it to ``state_dict_saver.async_save(..., queue=q)``, call
``q.maybe_finalize_async_calls(blocking=True, process_group=pg)`` before the next save and at the end, and may
``close()`` it. Megatron runs each call in a forked process; here each queue runs its calls one after another on a
background thread (DCP's own async_save already writes from a thread, and a fork of a process holding NCCL or
gloo state is unsafe). Calls finalize in the order they were scheduled; an error raised in the background is raised
again by the ``maybe_finalize_async_calls`` (or ``close``) that reaches it, so a failed save is never silent.
"""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple


class AsyncRequest(NamedTuple):
    """Megatron's request: ``async_fn(*async_fn_args, **async_fn_kwargs)`` runs in the background; after it is
    done, ``finalize_fns`` run in the thread that finalizes (in order, on every rank that scheduled it)."""

    async_fn: Callable[..., Any] | None
    async_fn_args: tuple
    finalize_fns: list[Callable[[], Any]]
    async_fn_kwargs: dict[str, Any] = {}  # only read: freeze copies it
    is_frozen: bool = False

    def add_finalize_fn(self, fn: Callable[[], Any]) -> None:
        if self.is_frozen:
            raise RuntimeError("Cannot add finalization functions to a frozen AsyncRequest")
        self.finalize_fns.append(fn)

    def freeze(self) -> AsyncRequest:
        # own copies: a caller's list (or the shared kwargs default) must not change under a running call
        return self._replace(finalize_fns=list(self.finalize_fns), async_fn_kwargs=dict(self.async_fn_kwargs),
                             is_frozen=True)


class _ActiveCall(NamedTuple):
    idx: int
    future: Future
    finalize_fns: list[Callable[[], Any]]


class AsyncCallsQueue:
    """A queue of background calls, finalized in order with :meth:`maybe_finalize_async_calls`."""

    def __init__(self, concurrent_calls: bool = True, max_unfinished_calls: int = 2, persistent: bool = False,
                 **_: Any) -> None:
        # Megatron's tuning knobs (concurrent_calls, max_unfinished_calls, persistent) are accepted: calls here run
        # one at a time on this queue's thread, which keeps a checkpoint's writes in schedule order.
        self.call_idx = -1
        self._calls: deque[_ActiveCall] = deque()
        self._lock = threading.Lock()
        # one finalizer at a time (two threads would both take the same calls' count and pop past the end, and
        # could run a later call's finalize functions before an earlier one's)
        self._finalizing = threading.RLock()
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    def _worker(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="smp-async-checkpoint")
        return self._executor

    def _track(self, future: Future, finalize_fns: Iterable[Callable[[], Any]] = ()) -> int:
        """Queue a call already running elsewhere (``state_dict_saver.async_save``'s DCP future)."""
        if self._closed:
            raise RuntimeError("AsyncCallsQueue: the queue is closed; make a new one for further saves")
        with self._lock:
            self.call_idx += 1
            self._calls.append(_ActiveCall(self.call_idx, future, list(finalize_fns)))
            return self.call_idx

    def schedule_async_request(self, async_request: AsyncRequest) -> int:
        """Start ``async_request.async_fn`` in the background; returns the call's index (0, 1, ...)."""
        request = async_request.freeze()
        if request.async_fn is None:  # Megatron: None is a no-op call, finalized like any other
            future: Future = Future()
            future.set_result(None)
        else:
            if self._closed:
                raise RuntimeError("AsyncCallsQueue: the queue is closed; make a new one for further saves")
            future = self._worker().submit(request.async_fn, *request.async_fn_args, **request.async_fn_kwargs)
        return self._track(future, request.finalize_fns)

    def maybe_finalize_async_calls(self, blocking: bool = False, process_group: Any = None,
                                   no_dist: bool = True) -> list[int]:
        """Finalize the calls that are done, oldest first; ``blocking=True`` waits for all of them.

        Returns the indices finalized. Non-blocking, with a ``process_group`` (SMP) or ``no_dist=False``
        (Megatron), the group's ranks agree on how many calls are done before any finalizes, so finalize functions
        that talk to the group run on all its ranks alike; this is then a collective over that group.
        An exception of a background call is raised here, after its call has left the queue.
        """
        with self._finalizing:
            ready = len(self._calls) if blocking else self._done_prefix()
            if not blocking and (process_group is not None or not no_dist):
                ready = _agree_min(ready, process_group)
            finalized = []
            for _ in range(ready):
                with self._lock:
                    if not self._calls:  # a finalize function of this thread finalized the rest itself
                        break
                    call = self._calls.popleft()
                call.future.result()  # waits when blocking; raises the background call's own error, as it was
                for finalize in call.finalize_fns:
                    finalize()
                finalized.append(call.idx)
            return finalized

    def _done_prefix(self) -> int:
        """How many calls, from the oldest, have finished (calls finalize in order)."""
        count = 0
        for call in list(self._calls):
            if not call.future.done():
                break
            count += 1
        return count

    def get_num_unfinalized_calls(self) -> int:
        return len(self._calls)

    def close(self, abort: bool = False) -> None:
        """Finalize every call (waiting for them), then stop the queue's thread."""
        try:
            if not abort:
                self.maybe_finalize_async_calls(blocking=True)
        finally:
            self._closed = True
            if self._executor is not None:
                self._executor.shutdown(wait=not abort, cancel_futures=abort)
                self._executor = None


class _AgreementGroups(dict):
    """rank tuple -> the gloo group the queue agrees over; a class so that teardown can hold a weak reference."""


_AGREEMENT_GROUPS = _AgreementGroups()


def _agreement_group(process_group: Any) -> Any:
    """A gloo group of the same ranks, used for nothing else. Not the group itself: DCP's background thread runs
    that group's collectives while the save is pending, and two threads' collectives on one group interleave
    (gloo pairs them by order, so each would get the other's data, or both wait forever)."""
    import torch.distributed as dist

    group = process_group if process_group is not None else dist.group.WORLD
    ranks = tuple(dist.get_process_group_ranks(group))
    if ranks not in _AGREEMENT_GROUPS:
        if not _AGREEMENT_GROUPS:
            from ...teardown import release_at_exit

            release_at_exit(_AGREEMENT_GROUPS, _AgreementGroups.clear)  # joins their gloo threads before exit
        # made by the group's members only: every member reaches this call, in the same order
        _AGREEMENT_GROUPS[ranks] = dist.new_group(list(ranks), backend="gloo", use_local_synchronization=True)
    return _AGREEMENT_GROUPS[ranks]


def _agree_min(count: int, process_group: Any) -> int:
    """The smallest ``count`` over the group's ranks (the calls every rank has finished)."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        return count
    value = torch.tensor([count], dtype=torch.int64)
    dist.all_reduce(value, op=dist.ReduceOp.MIN, group=_agreement_group(process_group))
    return int(value.item())


__all__ = ["AsyncCallsQueue", "AsyncRequest"]
