"""CUDA only: the native backend's copy-engine AllGather (issued whole in C++) at its edges, against NCCL.

Run by dist_worker.py (scenario ``ce_edges``): outputs at a storage offset (in place and not), an input
overlapping the output across a chunk boundary, 1- and 8-byte dtypes across the default parts, two smddp
groups interleaved on two streams with a buffer growth between, a call from a fresh thread (no current
context; the GIL taken there for a new size's parts), an asynchronous call waited on another stream, and a
call of more than 2 GiB per rank (part offsets and output offsets past 2^31).
"""
from __future__ import annotations

import threading

import torch
import torch.distributed as dist

CE = 1  # routing.NATIVE_PATH_CODES["ce"]


def scenario_ce_edges(rank: int, ws: int, device: str) -> None:
    from smdist_launcher.smddp import force_path, native_backend
    from smdist_launcher.smddp.fast_allgather import pipeline_parts

    world = dist.group.WORLD
    backend = native_backend.native_backend_of(world)
    if backend is None or not getattr(native_backend._module, "CE_NATIVE", False):
        raise AssertionError(f"no native copy-engine AllGather here: {native_backend.unavailable_reason()}")
    nccl_pg = dist.new_group(backend="nccl")
    second = dist.new_group(backend="smddp")
    backends = {id(world): backend, id(second): native_backend.native_backend_of(second)}
    gen = torch.Generator(device="cuda").manual_seed(500 + rank)
    checks = 0

    def values(n: int, dtype: torch.dtype) -> torch.Tensor:
        if dtype == torch.bool:
            return torch.rand(n, generator=gen, device="cuda") < 0.5
        if not dtype.is_floating_point:
            return torch.randint(0, 255, (n,), generator=gen, device="cuda", dtype=dtype)
        return torch.randn(n, generator=gen, device="cuda").to(dtype)

    def want_of(x: torch.Tensor) -> torch.Tensor:
        want = torch.empty(x.numel() * ws, dtype=x.dtype, device="cuda")
        dist.all_gather_into_tensor(want, x.contiguous(), group=nccl_pg)
        return want

    def gather(out: torch.Tensor, x: torch.Tensor, name: str, pg: dist.ProcessGroup = world) -> None:
        b = backends[id(pg)]
        before = b.fast_calls()[CE]
        dist.all_gather_into_tensor(out, x, group=pg)
        if b.fast_calls()[CE] != before + 1:
            raise AssertionError(f"{name}: the copy engines did not serve the call")

    def same(name: str, got: torch.Tensor, want: torch.Tensor) -> None:
        nonlocal checks
        torch.cuda.synchronize()
        if not torch.equal(got, want):
            bad = (got != want).nonzero()
            raise AssertionError(f"{name}: differs from NCCL at {bad.numel()} elements, first {bad[:4].tolist()}")
        checks += 1

    for pg in (world, second):
        force_path(pg, "all_gather", "ce")
    try:
        # an output at an odd storage offset; the bytes before it stay untouched
        n = (1 << 18) + 7
        x = values(n, torch.float32)
        base = torch.full((n * ws + 3,), float("nan"), device="cuda")
        gather(base[3:], x, "offset output")
        same("offset output", base[3:], want_of(x))
        if not torch.isnan(base[:3]).all():
            raise AssertionError("offset output: the bytes before the output were written")
        # in place at a storage offset (FSDP2-like, the output not at its allocation's start)
        n = (1 << 17) + 1
        x = values(n, torch.bfloat16)
        base = torch.full((n * ws + 5,), float("nan"), device="cuda", dtype=torch.bfloat16)
        out = base[5:]
        out[rank * n : (rank + 1) * n].copy_(x)
        gather(out, out[rank * n : (rank + 1) * n], "in place at an offset")
        same("in place at an offset", out, want_of(x))
        # an input overlapping the output one element off its own chunk (copied aside first)
        n = (1 << 17) + 3
        x = values(n, torch.float32)
        base = torch.full((n * ws + 1,), float("nan"), device="cuda")
        base[rank * n + 1 : rank * n + 1 + n].copy_(x)
        gather(base[: n * ws], base[rank * n + 1 : rank * n + 1 + n], "overlapping input")
        same("overlapping input", base[: n * ws], want_of(x))
        # 1- and 8-byte dtypes across the default part boundaries (odd byte counts)
        engine = backend.helper().allgather  # set up by the first copy-engine call above
        for dtype, n in ((torch.uint8, (64 << 20) + 3), (torch.float64, (8 << 20) + 1), (torch.bool, (32 << 20) + 1)):
            x = values(n, dtype)
            out = torch.empty(n * ws, dtype=dtype, device="cuda")
            parts = backend.ce_stats()[2]
            gather(out, x, f"{dtype} n={n}")
            want = len(pipeline_parts(n * x.element_size(), engine.chunks, engine.min_part))
            if backend.ce_stats()[2] - parts != want:
                raise AssertionError(f"{dtype} n={n}: {backend.ce_stats()[2] - parts} parts staged, want {want}")
            same(f"{dtype} n={n}", out, want_of(x))
        # two smddp groups interleaved on two streams, no host sync between; the second group grows its pair
        streams = [torch.cuda.Stream(), torch.cuda.Stream()]
        for st in streams:
            st.wait_stream(torch.cuda.current_stream())
        calls = [(world, streams[0], (1 << 20) + 1), (second, streams[1], (1 << 19) + 3),
                 (world, streams[1], (3 << 20) + 5), (second, streams[0], (9 << 20) + 7), (world, streams[0], 4099)]
        xs = [values(n, torch.bfloat16) for _, _, n in calls]
        outs = [torch.full((x.numel() * ws,), float("nan"), device="cuda", dtype=torch.bfloat16) for x in xs]
        for i, ((pg, st, _), x, out) in enumerate(zip(calls, xs, outs, strict=True)):
            with torch.cuda.stream(st):
                gather(out, x, f"two groups, call {i}", pg=pg)
        for st in streams:
            torch.cuda.current_stream().wait_stream(st)
        for i, (x, out) in enumerate(zip(xs, outs, strict=True)):
            same(f"two groups, call {i}", out, want_of(x))
        # from a fresh thread: no current context there, and a size never seen (its parts asked with the GIL)
        n = (5 << 20) + 11
        x = values(n, torch.float16)
        out = torch.empty(n * ws, device="cuda", dtype=torch.float16)
        failed: list[BaseException] = []

        def in_thread(out: torch.Tensor = out, x: torch.Tensor = x) -> None:
            try:
                gather(out, x, "from a thread")
                torch.cuda.current_stream(x.device).synchronize()
            except BaseException as exc:  # noqa: BLE001  reported by the main thread
                failed.append(exc)

        worker = threading.Thread(target=in_thread)
        worker.start()
        worker.join(timeout=60)
        if worker.is_alive() or failed:
            raise AssertionError(f"a call from a fresh thread: {'hung' if worker.is_alive() else failed[0]!r}")
        same("from a thread", out, want_of(x))
        # asynchronous, waited on by another stream
        n = (2 << 20) + 9
        x = values(n, torch.float32)
        out = torch.full((n * ws,), float("nan"), device="cuda")
        work = dist.all_gather_into_tensor(out, x, group=world, async_op=True)
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            work.wait()
            copied = out.clone()
        torch.cuda.current_stream().wait_stream(side)
        same("async, waited on another stream", copied, want_of(x))
        # more than 2 GiB per rank: part starts and the peers' chunk offsets past 2^31 bytes
        n = (2 << 30) + (1 << 16) + 3
        x = values(n, torch.uint8)
        out = torch.empty(n * ws, dtype=torch.uint8, device="cuda")
        gather(out, x, "over 2 GiB a rank")
        same("over 2 GiB a rank", out, want_of(x))
    finally:
        for pg in (world, second):
            force_path(pg, "all_gather", None)
    print(f"rank {rank}: {checks} copy-engine edge checks equal NCCL", flush=True)


def scenario_ce_one_rank_set_up_fails(rank: int, ws: int, device: str) -> None:
    """The last rank cannot set up the C++ copy-engine state (a state it cannot read: its own failure, as a
    driver or event error would be): every rank must take the Python choreography alike, not hang at the
    barriers of parts its peer never stages."""
    from smdist_launcher.smddp import force_path, native_backend
    from smdist_launcher.smddp.fast_allgather import CopyEngineAllGather

    world = dist.group.WORLD
    backend = native_backend.native_backend_of(world)
    if backend is None or not getattr(native_backend._module, "CE_NATIVE", False):
        raise AssertionError(f"no native copy-engine AllGather here: {native_backend.unavailable_reason()}")
    if rank == ws - 1:
        # the pair's rendezvous is collective: this rank still makes it (as its peer does), then hands C++ a state
        # it cannot take (one item short); skipping it would leave the peer in the rendezvous, not at the agreement
        made = CopyEngineAllGather.native_state
        CopyEngineAllGather.native_state = (  # type: ignore[method-assign]
            lambda self, nbytes: made(self, nbytes)[:-1])
    nccl_pg = dist.new_group(backend="nccl")
    force_path(world, "all_gather", "ce")
    gen = torch.Generator(device="cuda").manual_seed(700 + rank)
    for n in ((8 << 20) + 3, (24 << 20) + 1):  # the second grows the pair, on the Python path both now take
        x = torch.randn(n, generator=gen, device="cuda").to(torch.bfloat16)
        out = torch.full((n * ws,), float("nan"), device="cuda", dtype=torch.bfloat16)
        dist.all_gather_into_tensor(out, x, group=world)
        want = torch.empty_like(out)
        dist.all_gather_into_tensor(want, x, group=nccl_pg)
        torch.cuda.synchronize()
        if not torch.equal(out, want):
            raise AssertionError(f"n={n}: the fallen-back AllGather differs from NCCL")
    if backend.ce_stats()[0] != 0:
        raise AssertionError(f"rank {rank} issued {backend.ce_stats()[0]} calls natively while a peer could not")
    print("one rank's failed set-up: every rank fell back alike", flush=True)
