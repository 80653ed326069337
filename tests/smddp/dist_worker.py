"""One rank of a multi-process smddp check, run as a script by tests/smddp/conftest.py.

    python dist_worker.py SCENARIO RANK WORLD_SIZE INIT_FILE DEVICE

Exits 0 when every check of the scenario passed; raises (non-zero exit, traceback) otherwise.
Checks are grouped into few scenarios because each process start costs seconds on CI.
"""
from __future__ import annotations

import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

R = dist.ReduceOp
OPS = {"sum": R.SUM, "avg": R.AVG, "max": R.MAX, "min": R.MIN, "product": R.PRODUCT}
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64]
SIZES = [1, 7, 1001]


def rank_input(rank: int, n: int, dtype: torch.dtype, device: str, small: bool = False) -> torch.Tensor:
    """Integer-valued data, exact in every dtype tested (sums of 4 ranks stay below 256)."""
    base = torch.arange(n, dtype=torch.int64)
    values = (base % 3 + 1 + (rank % 2)) if small else (base % 13 + 3 * rank + 1)
    return values.to(dtype=dtype, device=device)


def expected_reduce(op: str, inputs: list[torch.Tensor]) -> torch.Tensor:
    stacked = torch.stack([t.cpu().to(torch.float64) for t in inputs])
    out = {
        "sum": stacked.sum(0),
        "avg": stacked.sum(0) / len(inputs),
        "max": stacked.max(0).values,
        "min": stacked.min(0).values,
        "product": stacked.prod(0),
    }[op]
    if not inputs[0].is_floating_point():
        out = torch.trunc(out)
    return out.to(inputs[0].dtype)


def check(name: str, got: torch.Tensor, want: torch.Tensor) -> None:
    got = got.cpu()
    want = want.cpu().to(got.dtype)
    if got.is_floating_point():
        ok = torch.allclose(got.double(), want.double(), rtol=1e-2 if got.dtype != torch.float32 else 1e-6, atol=1e-6)
    else:
        ok = torch.equal(got, want)
    if not ok:
        raise AssertionError(f"{name}: got {got.flatten()[:8].tolist()} want {want.flatten()[:8].tolist()}")


def collectives(
    rank: int, ws: int, device: str, group: dist.ProcessGroup | None = None, ranks: list[int] | None = None
) -> int:
    """Every collective x dtype x op x odd size on ``group``; returns the number of checks."""
    ranks = ranks or list(range(ws))
    n_g = len(ranks)
    me = ranks.index(rank)
    count = 0
    for dtype in DTYPES:
        for n in SIZES:
            for op_name, op in OPS.items():
                small = op_name == "product"
                inputs = [rank_input(r, n, dtype, device, small) for r in ranks]
                t = inputs[me].clone()
                dist.all_reduce(t, op=op, group=group)
                check(f"all_reduce {op_name} {dtype} n={n}", t, expected_reduce(op_name, inputs))
                # reduce_scatter_tensor: rank j of the group keeps chunk j of the reduction
                big = [torch.cat([rank_input(r, n, dtype, device, small) + k for k in range(n_g)]) for r in ranks]
                out = torch.empty(n, dtype=dtype, device=device)
                dist.reduce_scatter_tensor(out, big[me], op=op, group=group)
                want = expected_reduce(op_name, big)[me * n : (me + 1) * n]
                check(f"reduce_scatter_tensor {op_name} {dtype} n={n}", out, want)
                count += 2
            out_list = [torch.empty(n, dtype=dtype, device=device) for _ in ranks]
            dist.reduce_scatter(out_list[0], [rank_input(rank, n, dtype, device) + k for k in range(n_g)], group=group)
            want = expected_reduce("sum", [torch.cat([rank_input(r, n, dtype, device) + k for k in range(n_g)])
                                           for r in ranks])
            check(f"reduce_scatter list {dtype} n={n}", out_list[0], want[me * n : (me + 1) * n])
            inp = rank_input(rank, n, dtype, device)
            gathered = torch.empty(n * n_g, dtype=dtype, device=device)
            dist.all_gather_into_tensor(gathered, inp, group=group)
            everyone = torch.cat([rank_input(r, n, dtype, device) for r in ranks])
            check(f"all_gather_into_tensor {dtype} n={n}", gathered, everyone)
            parts = [torch.empty(n, dtype=dtype, device=device) for _ in ranks]
            dist.all_gather(parts, inp, group=group)
            check(f"all_gather {dtype} n={n}", torch.cat(parts), everyone)
            b = inp.clone()
            dist.broadcast(b, src=ranks[-1], group=group)
            check(f"broadcast {dtype} n={n}", b, rank_input(ranks[-1], n, dtype, device))
            count += 4
    # all_to_all_single: rank i sends block j to rank j
    send = torch.arange(n_g * 3, dtype=torch.float32, device=device) + 100 * me
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    check("all_to_all_single", recv,
          torch.cat([torch.arange(3, dtype=torch.float32) + 3 * me + 100 * j for j in range(n_g)]))
    # reduce to one root
    r = rank_input(rank, 5, torch.float32, device)
    dist.reduce(r, dst=ranks[0], group=group)
    if me == 0:
        check("reduce", r, expected_reduce("sum", [rank_input(q, 5, torch.float32, device) for q in ranks]))
    # async: several in flight, then wait all
    ts = [rank_input(rank, 257, torch.float32, device) * (i + 1) for i in range(4)]
    works = [dist.all_reduce(t, async_op=True, group=group) for t in ts]
    gathered = torch.empty(257 * n_g, device=device)
    works.append(dist.all_gather_into_tensor(gathered, ts[0].clone(), async_op=True, group=group))
    for w in works:
        w.wait()
    for i, t in enumerate(ts[:-1]):
        want = expected_reduce("sum", [rank_input(q, 257, torch.float32, device) * (i + 1) for q in ranks])
        check(f"async all_reduce {i}", t, want)
    t = rank_input(rank, 9, torch.float32, device)
    fut = dist.all_reduce(t, op=R.AVG, async_op=True, group=group).get_future()
    check("async avg future", fut.wait()[0],
          expected_reduce("avg", [rank_input(q, 9, torch.float32, device) for q in ranks]))
    dist.barrier(group=group)
    return count + 8


def scenario_collectives(rank: int, ws: int, device: str) -> None:
    n = collectives(rank, ws, device)
    if ws >= 4:
        sub_ranks = [1, 3]
        sub = dist.new_group(sub_ranks, backend="smddp")
        other = dist.new_group([0, 2], backend="smddp")
        if rank in sub_ranks:
            n += collectives(rank, ws, device, sub, sub_ranks)
        else:
            t = torch.ones(3, device=device)
            dist.all_reduce(t, group=other)
            check("second subgroup", t, torch.full((3,), 2.0))
    print(f"rank {rank}: {n} checks passed on {device}")


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def scenario_ddp(rank: int, ws: int, device: str) -> None:
    """DDP over smddp ends with the same parameters as DDP over gloo/nccl."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    reference_backend = "gloo" if device == "cpu" else "nccl"
    ref_group = dist.new_group(backend=reference_backend)
    # CUDA: also DDP's Python comm-hook path (all_reduce(async_op=True).get_future().then(...))
    hooks = [None] + ([default_hooks.bf16_compress_hook] if device == "cuda" else [])
    for hook in hooks:
        results = []
        for group in (None, ref_group):
            model = _model().to(device)
            ddp = DDP(model, process_group=group,
                      device_ids=None if device == "cpu" else [torch.cuda.current_device()])
            if hook is not None:
                ddp.register_comm_hook(group, hook)
            opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
            gen = torch.Generator().manual_seed(1234 + rank)
            for _ in range(5):
                x = torch.randn(8, 16, generator=gen).to(device)
                loss = ddp(x).square().mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            results.append([p.detach().cpu().clone() for p in model.parameters()])
        rtol = 1e-5 if hook is None else 1e-2  # bf16 sums: rounding order may differ on 4+ ranks
        for a, b in zip(*results, strict=True):
            if not torch.allclose(a, b, rtol=rtol, atol=1e-6 if hook is None else 1e-3):
                raise AssertionError(f"DDP (hook {hook}) parameters differ between smddp and {reference_backend}: "
                                     f"{(a - b).abs().max()}")
    print(f"rank {rank}: DDP smddp == {reference_backend}")


def scenario_fsdp2(rank: int, ws: int, device: str) -> None:
    """FSDP2 fully_shard trains over smddp exactly like one process on the same global batch."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device, (ws,))
    model = _model().to(device)
    reference = _model().to(device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(7)
    for _ in range(3):
        x = torch.randn(8, 16, generator=gen).to(device)  # same batch on every rank
        for m, o in ((model, opt), (reference, ref_opt)):
            o.zero_grad()
            m(x).square().mean().backward()
            o.step()
    for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
        full = p.full_tensor().detach().cpu()
        if not torch.allclose(full, q.detach().cpu(), rtol=1e-5, atol=1e-6):
            raise AssertionError(f"FSDP2 {name} differs from the single-process reference")
    print(f"rank {rank}: FSDP2 over smddp matches the reference")


def scenario_funcol(rank: int, ws: int, device: str) -> None:
    """Functional collectives (what DTensor uses) reach a real backend through smddp."""
    import torch.distributed._functional_collectives as funcol

    group = dist.group.WORLD
    x = rank_input(rank, 6, torch.float32, device)
    gathered = funcol.all_gather_tensor(x, 0, group)
    check("funcol all_gather_tensor", gathered, torch.cat([rank_input(r, 6, torch.float32, device) for r in range(ws)]))
    summed = funcol.all_reduce(x, "sum", group)
    check("funcol all_reduce", summed,
          expected_reduce("sum", [rank_input(r, 6, torch.float32, device) for r in range(ws)]))
    big = torch.cat([x + k for k in range(ws)])
    scattered = funcol.reduce_scatter_tensor(big, "sum", 0, group)
    want = expected_reduce("sum", [torch.cat([rank_input(r, 6, torch.float32, device) + k for k in range(ws)])
                                   for r in range(ws)])
    check("funcol reduce_scatter_tensor", scattered, want[rank * 6 : (rank + 1) * 6])
    print(f"rank {rank}: functional collectives over smddp ok")


def scenario_fast_paths(rank: int, ws: int, device: str) -> None:
    """CUDA only: every fast path, forced, against NCCL on random data (odd sizes included)."""
    from smdist_launcher.smddp import force_path

    smddp_pg = dist.group.WORLD
    nccl_pg = dist.new_group(backend="nccl")
    gen = torch.Generator(device="cuda").manual_seed(100 + rank)
    checks = 0
    python_group = hasattr(smddp_pg, "cuda_path")  # the Python process group, not the native backend
    ce_variants = [("ce", True), ("ce", False), ("nccl", True)]  # (path, native helper on)
    native_lib = None
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for path, use_native in ce_variants:
            force_path(smddp_pg, "all_gather", path)
            engine = smddp_pg.cuda_path.allgather_ce if python_group else None  # None until first fast call
            if engine is not None:
                native_lib = native_lib or engine.lib
                engine.lib = native_lib if use_native else None
            for n in (1, 1001, 4096, 3 * 1024 * 1024 + 8):
                x = torch.randn(n, generator=gen, device="cuda").to(dtype)
                a = torch.full((n * ws,), float("nan"), device="cuda", dtype=dtype)
                b = torch.empty_like(a)
                dist.all_gather_into_tensor(a, x, group=smddp_pg)
                dist.all_gather_into_tensor(b, x, group=nccl_pg)
                if not torch.equal(a, b):
                    raise AssertionError(f"all_gather path={path} {dtype} n={n} differs from NCCL")
                checks += 1
        for path in ("one_shot", "two_shot", "nccl"):
            force_path(smddp_pg, "all_reduce", path)
            for n in (8, 1000, 4096, 65536, 262144 + 8, 7):
                for op in (R.SUM, R.AVG):
                    x = torch.randn(n, generator=gen, device="cuda").to(dtype)
                    a, b = x.clone(), x.clone()
                    for _ in range(2):  # twice: both staging buffers
                        a.copy_(x)
                        dist.all_reduce(a, op=op, group=smddp_pg)
                    dist.all_reduce(b, op=op, group=nccl_pg)
                    # Summation order differs (ring vs one/two-shot, fp32 accumulation inside the
                    # symm-mem kernels), so compare by relative norm, not element by element.
                    tol = 1e-5 if dtype == torch.float32 else 1e-2
                    err = ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()
                    if not err < tol or not torch.isfinite(a).all():
                        raise AssertionError(
                            f"all_reduce path={path} {dtype} n={n} op={op}: relative error {err:.2e} vs NCCL")
                    checks += 1
    force_path(smddp_pg, "all_gather", None)
    force_path(smddp_pg, "all_reduce", None)
    # the copy-engine AllGather pipelined in parts (staging of part k+1 under the pull of part k):
    # odd sizes, parts of 64 KiB so that small tensors split too, both buffers of the pair
    from smdist_launcher.smddp import native_backend
    from smdist_launcher.smddp.fast_allgather import pipeline_parts

    force_path(smddp_pg, "all_gather", "ce")
    native = native_backend.native_backend_of(smddp_pg)
    engine = native.helper().allgather if native is not None else smddp_pg.cuda_path.allgather_ce
    if engine is not None and engine.pipelined:
        saved = (engine.chunks, engine.min_part)
        engine.chunks, engine.min_part = 5, 1 << 16
        for dtype in (torch.bfloat16, torch.float32):
            for n in (1001, (1 << 19) + 3, 3 * 1024 * 1024 + 8):
                if n > 100_000 and len(pipeline_parts(n * dtype.itemsize, 5, 1 << 16)) < 2:
                    raise AssertionError(f"n={n} {dtype}: expected several pipelined parts")
                for _ in range(2):  # both buffers of the pair
                    x = torch.randn(n, generator=gen, device="cuda").to(dtype)
                    a = torch.full((n * ws,), float("nan"), device="cuda", dtype=dtype)
                    b = torch.empty_like(a)
                    dist.all_gather_into_tensor(a, x, group=smddp_pg)
                    dist.all_gather_into_tensor(b, x, group=nccl_pg)
                    if not torch.equal(a, b):
                        raise AssertionError(f"pipelined all_gather {dtype} n={n} differs from NCCL")
                    checks += 1
        engine.chunks, engine.min_part = saved
    force_path(smddp_pg, "all_gather", None)
    # stream order: a fast-path result consumed by the next kernel, and async wait on another stream
    x = torch.randn(1 << 20, generator=gen, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(x.numel() * ws, device="cuda", dtype=x.dtype)
    side = torch.cuda.Stream()
    force_path(smddp_pg, "all_gather", "ce")
    work = dist.all_gather_into_tensor(out, x, group=smddp_pg, async_op=True)
    with torch.cuda.stream(side):
        work.wait()
        total = out.float().sum()
    ref = torch.empty_like(out)
    dist.all_gather_into_tensor(ref, x, group=nccl_pg)
    torch.cuda.synchronize()
    if not torch.allclose(total, ref.float().sum()):
        raise AssertionError("async fast-path result not ordered before the waiting stream")
    force_path(smddp_pg, "all_gather", None)
    checks += _ce_edges(rank, ws, smddp_pg, nccl_pg, gen)
    from smdist_launcher.smddp import native

    print(f"rank {rank}: {checks + 1} fast-path checks equal NCCL "
          f"(native helper: {native_lib is not None}, {native.unavailable_reason()})")


def _ce_edges(rank: int, ws: int, smddp_pg: dist.ProcessGroup, nccl_pg: dist.ProcessGroup,
              gen: torch.Generator) -> int:
    """CUDA only: the copy-engine AllGather's edges, against NCCL: in place (FSDP2's input is the
    output's rank chunk) in several parts of an odd size; inside CUDA-graph capture (NCCL serves the
    captured call, replays stay right); calls on two streams while a peer's pulls lag (the calls stay
    one chain: no buffer is restaged while a peer still reads it); ranks whose parts setting differs
    (the group's fast path goes off on every rank, NCCL serves)."""
    from smdist_launcher.smddp import force_path, native_backend

    def engine_of(pg: dist.ProcessGroup):  # type: ignore[no-untyped-def]
        backend = native_backend.native_backend_of(pg)
        return backend.helper().allgather if backend is not None else pg.cuda_path.allgather_ce

    def ce_calls(pg: dist.ProcessGroup) -> int | None:
        backend = native_backend.native_backend_of(pg)
        return backend.fast_calls()[1] if backend is not None else None  # routing.NATIVE_PATH_CODES["ce"]

    def gather(out: torch.Tensor, x: torch.Tensor, name: str, pg: dist.ProcessGroup = smddp_pg,
               ce: bool | None = True) -> None:
        before = ce_calls(pg)
        dist.all_gather_into_tensor(out, x, group=pg)
        after = ce_calls(pg)
        if ce is not None and before is not None and after != before + int(ce):
            raise AssertionError(f"{name}: copy-engine calls {before} -> {after}, expected ce={ce}")

    def against_nccl(name: str, got: torch.Tensor, x: torch.Tensor) -> None:
        want = torch.empty_like(got)
        dist.all_gather_into_tensor(want, x, group=nccl_pg)
        torch.cuda.synchronize()
        if not torch.equal(got, want):
            raise AssertionError(f"{name} differs from NCCL")

    checks = 0
    force_path(smddp_pg, "all_gather", "ce")
    engine = engine_of(smddp_pg)
    saved = (engine.chunks, engine.min_part)
    engine.chunks, engine.min_part = 3, 1 << 16
    for dtype in (torch.bfloat16, torch.float32):
        n = (1 << 18) + 5
        x = torch.randn(n, generator=gen, device="cuda").to(dtype)
        out = torch.full((n * ws,), float("nan"), device="cuda", dtype=dtype)
        mine = out[rank * n : (rank + 1) * n]
        mine.copy_(x)
        gather(out, mine, f"in-place {dtype}")
        against_nccl(f"in-place all_gather {dtype} n={n}", out, x)
        checks += 1
    # Every rank's input is the output's chunk 0: in place on rank 0, overlapping elsewhere. The path must
    # not depend on that (rank 0 on the copy engines, its peers on NCCL hung): every rank pulls, the
    # overlapping inputs copied aside first, and the result is the gather of the inputs.
    n = (1 << 17) + 3
    x = torch.randn(n, generator=gen, device="cuda")
    out = torch.full((n * ws,), float("nan"), device="cuda")
    out[:n].copy_(x)
    gather(out, out[:n], "input at chunk 0 on every rank")
    against_nccl(f"all_gather of chunk 0 on every rank n={n}", out, x)
    checks += 1
    engine.chunks, engine.min_part = saved
    # CUDA-graph capture: warmed up eagerly, then captured: NCCL serves the captured call
    n = (1 << 20) + 3
    static_in = torch.randn(n, generator=gen, device="cuda")
    static_out = torch.empty(n * ws, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        gather(static_out, static_in, "warm-up before capture")
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gather(static_out, static_in, "captured", ce=False)
    for step in range(3):
        static_in.copy_(torch.randn(n, generator=gen, device="cuda"))
        graph.replay()
        against_nccl(f"captured all_gather replay {step}", static_out, static_in)
        checks += 1
    del graph
    # two streams, rank 1's pulls held back: without the chain, rank 0's third call (stream a)
    # restages the buffer of its first call while rank 1 still pulls that call's data from it
    n = 4 << 20
    xs = [torch.randn(n, generator=gen, device="cuda").to(torch.bfloat16) for _ in range(3)]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    for chained in (False, True):
        outs = [torch.full((n * ws,), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in range(3)]
        for st in streams:
            st.wait_stream(torch.cuda.current_stream())
        torch.cuda.synchronize()
        dist.barrier(group=nccl_pg)
        if rank == 1:
            with torch.cuda.stream(engine.streams[0]):  # the pull stream
                torch.cuda._sleep(200_000_000)  # ~0.1 s
        for i, st in enumerate((streams[0], streams[1], streams[0])):
            if not chained:
                engine._last_stream = None  # what the engine did before calls were chained
            with torch.cuda.stream(st):
                gather(outs[i], xs[i], f"stream call {i}")
        for st in streams:
            torch.cuda.current_stream().wait_stream(st)
        torch.cuda.synchronize()
        wants = [torch.empty_like(o) for o in outs]
        for want, x in zip(wants, xs, strict=True):
            dist.all_gather_into_tensor(want, x, group=nccl_pg)
        torch.cuda.synchronize()
        bad = [i for i, (o, w) in enumerate(zip(outs, wants, strict=True)) if not torch.equal(o, w)]
        if chained and bad:
            raise AssertionError(f"all_gather calls on two streams: calls {bad} differ from NCCL")
        if not chained:
            print(f"rank {rank}: two-stream calls without the chain: calls {bad} differ from NCCL", flush=True)
    checks += 1
    # the pair re-made larger while the previous call's pulls still wait: the old buffers (and this
    # rank's mappings of the peers') may be freed only after those copies ran
    capacity = engine.buffers.pair.capacity
    n = capacity // 8  # fp32: half the capacity per rank
    x1, x2 = torch.randn(n, generator=gen, device="cuda"), torch.randn(capacity // 4 + 1, generator=gen, device="cuda")
    o1, o2 = torch.empty(n * ws, device="cuda"), torch.empty(x2.numel() * ws, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(engine.streams[0]):
        torch.cuda._sleep(200_000_000)  # ~0.1 s: this rank's pulls of the first call start late
    gather(o1, x1, "before growth")
    gather(o2, x2, "growing")
    if engine.buffers.pair.capacity <= capacity:
        raise AssertionError(f"the pair did not grow ({capacity} -> {engine.buffers.pair.capacity})")
    against_nccl("all_gather before the pair grew", o1, x1)
    against_nccl("all_gather that grew the pair", o2, x2)
    checks += 1
    # other collectives on other streams meanwhile, no host sync between: the copy-engine AllGather
    # (stream a), a routed AllReduce (Lamport / symmetric-memory kernel on 2 GPUs; stream b), a
    # ReduceScatter that NCCL serves (stream c)
    x = torch.randn((1 << 20) + 1, generator=gen, device="cuda")
    ag = torch.empty(x.numel() * ws, device="cuda")
    ar = torch.randn(1 << 14, generator=gen, device="cuda")
    ar_want = ar.clone()
    rs_in = torch.randn(ws * 4099, generator=gen, device="cuda")
    rs, rs_want = torch.empty(4099, device="cuda"), torch.empty(4099, device="cuda")
    side = [torch.cuda.Stream() for _ in range(3)]
    for st in side:
        st.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side[0]):
        gather(ag, x, "beside other collectives")
    with torch.cuda.stream(side[1]):
        dist.all_reduce(ar, group=smddp_pg)
    with torch.cuda.stream(side[2]):
        dist.reduce_scatter_tensor(rs, rs_in, group=smddp_pg)
    for st in side:
        torch.cuda.current_stream().wait_stream(st)
    against_nccl("all_gather beside other collectives", ag, x)
    dist.all_reduce(ar_want, group=nccl_pg)
    _close("all_reduce beside the copy-engine all_gather", ar, ar_want)
    dist.reduce_scatter_tensor(rs_want, rs_in, group=nccl_pg)
    _close("reduce_scatter beside the copy-engine all_gather", rs, rs_want)
    checks += 3
    force_path(smddp_pg, "all_gather", None)
    # ranks whose SMDDP_CE_CHUNKS differ: the group's copy-engine path goes off alike on every rank
    saved_env = os.environ.get("SMDDP_CE_CHUNKS")
    os.environ["SMDDP_CE_CHUNKS"] = str(2 + rank)
    try:
        odd = dist.new_group(backend="smddp")
        force_path(odd, "all_gather", "ce")
        x = torch.randn(1001, generator=gen, device="cuda")
        out = torch.empty(1001 * ws, device="cuda")
        gather(out, x, "parts differ", pg=odd, ce=False)
        against_nccl("all_gather with parts differing across ranks", out, x)
        backend = native_backend.native_backend_of(odd)
        state = backend.helper()._state if backend is not None else odd.cuda_path._fast_state
        if "settings differ" not in str(state):
            raise AssertionError(f"parts differing across ranks: fast-path state {state!r}")
        checks += 1
    finally:
        if saved_env is None:
            os.environ.pop("SMDDP_CE_CHUNKS", None)
        else:
            os.environ["SMDDP_CE_CHUNKS"] = saved_env
    return checks


def _close(name: str, a: torch.Tensor, b: torch.Tensor) -> None:
    """Equal up to summation order (ring vs one/two-shot kernels accumulate differently)."""
    tol = 1e-5 if a.dtype == torch.float32 else 1e-2
    err = ((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30)).item()
    if not err < tol or not torch.isfinite(a).all():
        raise AssertionError(f"{name}: relative error {err:.2e} vs NCCL")


def scenario_native(rank: int, ws: int, device: str) -> None:
    """CUDA only: the native C++ backend serves the group; routed and forced paths, offset and
    non-contiguous views, every op, async waits and CUDA-graph capture, all against NCCL."""
    from smdist_launcher.smddp import force_path, native_backend, routing

    group = dist.group.WORLD
    backend = native_backend.native_backend_of(group)
    if backend is None:
        raise AssertionError(f"the native backend does not serve the group: {native_backend.unavailable_reason()}")
    nccl_pg = dist.new_group(backend="nccl")
    gen = torch.Generator(device="cuda").manual_seed(300 + rank)
    checks = 0

    def compare(name: str, n: int, dtype: torch.dtype, op=R.SUM, offset: int = 0, path: int | None = None) -> None:
        """all_reduce of n elements (from ``offset`` of a larger tensor) on smddp and on NCCL."""
        nonlocal checks
        if dtype.is_floating_point:
            x = torch.randn(n + offset, generator=gen, device="cuda").to(dtype)
        else:
            x = torch.arange(n + offset, device="cuda", dtype=dtype) + rank
        a, b = x.clone(), x.clone()
        calls = backend.fast_calls()
        dist.all_reduce(a[offset:], op=op, group=group)
        dist.all_reduce(b[offset:], op=op, group=nccl_pg)
        if path is not None and backend.fast_calls()[path] != calls[path] + 1:
            raise AssertionError(f"{name}: path {path} did not run ({calls} -> {backend.fast_calls()})")
        if a.is_floating_point():
            _close(name, a, b)
        elif not torch.equal(a, b):
            raise AssertionError(f"{name}: differs from NCCL")
        checks += 1

    one, two, lamport = 2, 3, 4  # routing.NATIVE_PATH_CODES
    has_lamport = bool(getattr(native_backend._module, "LAMPORT", False))
    router = routing.Router(native=True, lamport=has_lamport)

    def routed_code(nbytes: int, dtype: torch.dtype) -> int | None:
        """The kernel the measured table sends this size to (None: NCCL); torch's kernels have no
        fp16 (NCCL serves it), smddp's Lamport kernel has."""
        path = router.choose("all_reduce", ws, nbytes)
        if path == "nccl" or (path in ("one_shot", "two_shot") and dtype == torch.float16):
            return None
        return routing.NATIVE_PATH_CODES[path]

    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        routed = (routed_code(65536, dtype), routed_code(3 << 20, dtype))
        for op in (R.SUM, R.AVG):
            compare(f"routed 64KiB {dtype} {op}", 65536 // dtype.itemsize, dtype, op, path=routed[0])
            compare(f"routed 3MiB {dtype} {op}", (3 << 20) // dtype.itemsize, dtype, op, path=routed[1])
            if dtype == torch.float16:
                continue
            for forced, code in (("one_shot", one), ("two_shot", two)):
                force_path(group, "all_reduce", forced)
                for n in (8, 1000, 4096, 65536 + 8):
                    compare(f"{forced} {dtype} n={n} {op}", n, dtype, op, path=code)
                # an offset view (not 16-byte aligned) goes through aligned scratch, same kernel
                compare(f"{forced} offset view {dtype}", 4096, dtype, op, offset=1, path=code)
                force_path(group, "all_reduce", None)
        # odd sizes and ops the kernels lack go to NCCL, still correct; a non-contiguous
        # tensor goes to NCCL too, which refuses it exactly as it does without smddp
        errors = []
        for pg in (group, nccl_pg):
            try:
                dist.all_reduce(torch.randn(4096, generator=gen, device="cuda").to(dtype)[::2], group=pg)
                errors.append(None)
            except (RuntimeError, ValueError) as exc:
                errors.append(type(exc).__name__)
        if errors[0] != errors[1]:
            raise AssertionError(f"non-contiguous {dtype}: smddp {errors[0]} vs NCCL {errors[1]}")
        compare(f"odd size {dtype}", 1001, dtype)
        compare(f"max {dtype}", 4096, dtype, R.MAX)
    compare("int32 sum", 4096, torch.int32)
    # async calls (DDP's reducer) go to NCCL or the Lamport kernel, both on a stream of their own
    # that overlaps the caller's compute; the result is ordered before a waiting side stream
    x = torch.randn(32768, generator=gen, device="cuda")
    ref = x.clone()
    side = torch.cuda.Stream()
    calls = backend.fast_calls()
    work = dist.all_reduce(x, group=group, async_op=True)
    want_calls = list(calls)

    def async_path(nbytes: int) -> str:  # routing.py: async calls follow all_reduce unless listed
        listed = ("all_reduce_async", ws) in router.table
        return router.choose("all_reduce_async" if listed else "all_reduce", ws, nbytes)

    if has_lamport and async_path(x.numel() * x.element_size()) == "lamport":
        want_calls[lamport] += 1
    if backend.fast_calls() != want_calls:
        raise AssertionError(f"async all_reduce: fast calls {calls} -> {backend.fast_calls()}, want {want_calls}")
    with torch.cuda.stream(side):
        work.wait()
        total = x.double().sum()
    dist.all_reduce(ref, group=nccl_pg)
    torch.cuda.synchronize()
    if not torch.allclose(total, ref.double().sum(), rtol=1e-6):
        raise AssertionError("async fast all_reduce not ordered before the waiting stream")
    checks += 1
    # the C++ backend routes asynchronous calls by the async table, or by the sync one without it
    for nbytes in (8 << 10, 4 << 20, 16 << 20, (16 << 20) + 16, 28 << 20, 64 << 20):
        want = routing.NATIVE_PATH_CODES[async_path(nbytes)]
        got = backend.route(routing.NATIVE_COLL_CODES["all_reduce_async"], nbytes)
        if got != want:
            raise AssertionError(f"async route for {nbytes} bytes: C++ {got}, routing.py {want}")
    checks += 1
    # CUDA graph: routed one-shot and two-shot calls captured and replayed on fresh inputs
    for n in (8192, 786432):  # 32 KiB and 3 MiB of fp32: one-shot and two-shot on 2 GPUs
        static = torch.zeros(n, device="cuda")
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # warm-up outside capture (buffers are set up on first use)
                dist.all_reduce(static, group=group)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            dist.all_reduce(static, group=group)
            static.mul_(2)
            dist.all_reduce(static, group=group)
        for step in range(3):
            fresh = torch.randn(n, generator=gen, device="cuda")
            static.copy_(fresh)
            graph.replay()
            want = fresh.clone()
            dist.all_reduce(want, group=nccl_pg)
            want.mul_(2)
            dist.all_reduce(want, group=nccl_pg)
            _close(f"graph n={n} replay {step}", static, want)
            checks += 1
    calls = backend.fast_calls()
    # barrier, broadcast, all_gather and reduce_scatter through the backend
    dist.barrier(group=group)
    b = torch.full((5,), float(rank), device="cuda")
    dist.broadcast(b, src=ws - 1, group=group)
    check("native broadcast", b, torch.full((5,), float(ws - 1)))
    g = torch.empty(3 * ws, device="cuda")
    dist.all_gather_into_tensor(g, torch.full((3,), float(rank), device="cuda"), group=group)
    check("native all_gather", g, torch.arange(ws, dtype=torch.float32).repeat_interleave(3))
    rs = torch.empty(2, device="cuda")
    dist.reduce_scatter_tensor(rs, torch.arange(2.0 * ws, device="cuda"), group=group)
    check("native reduce_scatter", rs, torch.arange(2.0 * ws)[2 * rank : 2 * rank + 2] * ws)
    checks += _native_ce(rank, ws, backend, group, nccl_pg, gen)
    print(f"rank {rank}: {checks + 3} native-backend checks equal NCCL (fast calls {calls})")


def _native_ce(rank: int, ws: int, backend, group: dist.ProcessGroup, nccl_pg: dist.ProcessGroup,  # type: ignore[no-untyped-def]
               gen: torch.Generator) -> int:
    """CUDA only: the copy-engine AllGather issued whole by the C++ backend (no Python per call):
    every dtype, odd sizes, repeated sizes (parts planned once per size), the parts re-planned when
    the engine's parts change, a non-contiguous input (NCCL serves it, as it refuses or not), buffer
    growth and a smaller call after it, all against NCCL."""
    from smdist_launcher.smddp import force_path, native_backend
    from smdist_launcher.smddp.fast_allgather import pipeline_parts

    if not getattr(native_backend._module, "CE_NATIVE", False):
        raise AssertionError("the native backend was built without its copy-engine AllGather")
    ce = 1  # routing.NATIVE_PATH_CODES["ce"]
    force_path(group, "all_gather", "ce")
    helper = backend.helper()
    x = torch.randn(8, generator=gen, device="cuda")
    dist.all_gather_into_tensor(torch.empty(8 * ws, device="cuda"), x, group=group)  # set up (may be done)
    engine = helper.allgather
    counted = {"allgather_ce": 0, "allgather_ce_plan": 0}
    plain = {name: getattr(helper, name) for name in counted}

    def counting(name: str):  # type: ignore[no-untyped-def]
        def call(*args):  # type: ignore[no-untyped-def]
            counted[name] += 1
            return plain[name](*args)
        return call

    for name in counted:
        setattr(helper, name, counting(name))  # the backend looks the methods up when it calls them
    checks = 0
    try:
        def gather(n: int, dtype: torch.dtype, name: str, fast: bool = True, x: torch.Tensor | None = None) -> None:
            nonlocal checks
            if x is None:
                x = (torch.randn(n, generator=gen, device="cuda") * 100).to(dtype)
            a = torch.full((n * ws,), 7, device="cuda", dtype=dtype)
            b = torch.empty_like(a)
            before = backend.fast_calls()[ce]
            dist.all_gather_into_tensor(a, x, group=group)
            dist.all_gather_into_tensor(b, x.contiguous(), group=nccl_pg)
            if backend.fast_calls()[ce] != before + int(fast):
                raise AssertionError(f"{name}: copy-engine calls {before} -> {backend.fast_calls()[ce]}, want {fast}")
            if not torch.equal(a, b):
                raise AssertionError(f"{name}: differs from NCCL")
            checks += 1

        sizes = (1, 1001, 4096 + 3, (1 << 20) + 7)
        for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.uint8):
            for n in sizes:
                for rep in range(2):  # both buffers of the pair; the second call plans nothing
                    gather(n, dtype, f"native ce {dtype} n={n} call {rep}")
        seen = {n * dt.itemsize for n in sizes for dt in (torch.float32, torch.bfloat16, torch.uint8)}
        if counted["allgather_ce"] or counted["allgather_ce_plan"] > len(seen):
            raise AssertionError(f"Python per call: {counted} for {len(seen)} sizes (want 0 calls, <= one plan a size)")
        # the parts re-planned when they change (every rank alike), and the staged parts counted
        saved = (engine.chunks, engine.min_part)
        n = (3 << 20) + 5  # fp32: 12 MiB + 20 bytes a rank
        for chunks in (5, 1, 3):
            engine.chunks, engine.min_part = chunks, 1 << 16
            want = len(pipeline_parts(n * 4, chunks, 1 << 16))
            before = backend.ce_stats()[2]
            gather(n, torch.float32, f"native ce in {chunks} parts")
            if backend.ce_stats()[2] - before != want:
                raise AssertionError(f"{chunks} parts wanted: C++ staged {backend.ce_stats()[2] - before} parts")
        engine.chunks, engine.min_part = saved
        # a non-contiguous input: NCCL serves the call on every rank (it raises there as it would without smddp)
        errors = []
        for pg in (group, nccl_pg):
            try:
                out = torch.empty(2048 * ws, device="cuda")
                before = backend.fast_calls()[ce]
                dist.all_gather_into_tensor(out, torch.randn(4096, generator=gen, device="cuda")[::2], group=pg)
                errors.append(None)
            except (RuntimeError, ValueError) as exc:
                errors.append(type(exc).__name__)
            if pg is group and backend.fast_calls()[ce] != before:
                raise AssertionError("a non-contiguous input took the copy engines")
        if errors[0] != errors[1]:
            raise AssertionError(f"non-contiguous all_gather input: smddp {errors[0]} vs NCCL {errors[1]}")
        checks += 1
        # growth: a call larger than the pair, then a smaller one on the new pair
        capacity = engine.buffers.pair.capacity
        gather(capacity // 2 + 3, torch.bfloat16, "native ce growing the pair")
        if engine.buffers.pair.capacity <= capacity:
            raise AssertionError(f"the pair did not grow ({capacity} -> {engine.buffers.pair.capacity})")
        gather(1001, torch.bfloat16, "native ce after growth")
    finally:
        for name in counted:
            delattr(helper, name)
        force_path(group, "all_gather", None)
    calls, host_ns, _ = backend.ce_stats()
    print(f"rank {rank}: native copy-engine AllGather: {calls} calls, {host_ns / max(calls, 1) / 1e3:.1f} us host "
          "each", flush=True)
    return checks


def scenario_lamport(rank: int, ws: int, device: str) -> None:
    """CUDA only: smddp's Lamport one-shot kernel (forced) against NCCL: every dtype and op,
    odd sizes, NaN, results bit-identical on every rank, hundreds of calls back to back without
    a sync (slot rotation), dtypes mixed in one slot, async calls waited on other streams, two
    issuing streams, CUDA graphs replayed between eager calls, and no peer wait timed out."""
    from smdist_launcher.smddp import force_path, native_backend

    group = dist.group.WORLD
    backend = native_backend.native_backend_of(group)
    if backend is None or not getattr(native_backend._module, "LAMPORT", False):
        raise AssertionError(f"the native backend has no Lamport kernel: {native_backend.unavailable_reason()}")
    nccl_pg = dist.new_group(backend="nccl")
    gen = torch.Generator(device="cuda").manual_seed(500 + rank)
    lamport = 4  # routing.NATIVE_PATH_CODES["lamport"]
    checks = 0
    force_path(group, "all_reduce", "lamport")

    def same_on_every_rank(name: str, t: torch.Tensor) -> None:
        everyone = torch.empty(ws * t.numel(), device="cuda", dtype=t.dtype)
        dist.all_gather_into_tensor(everyone, t.contiguous().view(-1), group=nccl_pg)
        if not all(torch.equal(c.view(torch.uint8), t.view(-1).view(torch.uint8))
                   for c in everyone.chunk(ws)):
            raise AssertionError(f"{name}: ranks disagree bit for bit")

    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        for op in (R.SUM, R.AVG):
            for n in (1, 7, 8, 1000, 1001, 4096, 65536 + 8, 262144 + 3, 1 << 21):
                x = torch.randn(n, generator=gen, device="cuda").to(dtype)
                a, b = x.clone(), x.clone()
                calls = backend.fast_calls()[lamport]
                dist.all_reduce(a, op=op, group=group)
                dist.all_reduce(b, op=op, group=nccl_pg)
                if backend.fast_calls()[lamport] != calls + 1:
                    raise AssertionError(f"lamport {dtype} n={n}: the kernel did not run")
                _close(f"lamport {dtype} n={n} {op}", a, b)
                same_on_every_rank(f"lamport {dtype} n={n}", a)
                checks += 1
        # inputs holding the sentinel's bits (all ones: a NaN) still arrive, as NaNs: from one
        # rank, from every rank, in the partial last vector; -0.0 keeps its sign; all ranks agree
        # bit for bit; and the slots are clean afterwards (the next call is exact)
        n = 67 if dtype == torch.float32 else 69  # a size whose last 16-byte vector is partial
        x = torch.ones(n, device="cuda", dtype=dtype)
        bits = x.view(torch.int16 if dtype.itemsize == 2 else torch.int32)
        if rank == ws - 1:
            bits[5] = -1
        bits[n - 1] = -1
        x[7] = -0.0
        dist.all_reduce(x, group=group)
        rest = torch.cat([x[:5], x[6:7], x[8 : n - 1]])
        negative_zero = -(1 << (8 * dtype.itemsize - 1))  # the sign bit alone, as a signed integer
        if not (torch.isnan(x[5]) and torch.isnan(x[n - 1]) and int(bits[7]) == negative_zero
                and torch.equal(rest, torch.full_like(rest, ws))):
            raise AssertionError(f"lamport sentinel inputs {dtype}: {x[:9].tolist()} ... {x[-2:].tolist()}")
        same_on_every_rank(f"lamport sentinel inputs {dtype}", x)
        y = torch.full((n,), float(rank + 1), device="cuda", dtype=dtype)
        dist.all_reduce(y, group=group)
        dist.all_reduce(y, group=group)  # both slots
        if not torch.equal(y, torch.full_like(y, ws * ws * (ws + 1) / 2)):
            raise AssertionError(f"lamport after sentinel inputs {dtype}: {y[:8].tolist()}")
        checks += 1
    # unaligned views take the kernel through an aligned copy, even where the offset differs by
    # rank (rank 0 aligned, the others not): a rank that went to NCCL alone would leave its peers
    # waiting; sync and async, the async result waited on by another stream
    side = torch.cuda.Stream()
    for dtype in (torch.float32, torch.bfloat16):
        for offsets, async_op in (((1,) * ws, False), (tuple(range(ws)), False), (tuple(range(ws)), True)):
            x = torch.randn(4097 + ws, generator=gen, device="cuda").to(dtype)
            a, b = x.clone(), x.clone()
            off = offsets[rank]
            calls = backend.fast_calls()[lamport]
            work = dist.all_reduce(a[off : off + 4001], group=group, async_op=async_op)
            if work is not None:
                with torch.cuda.stream(side):
                    work.wait()
                    got = a[off : off + 4001].clone()
                torch.cuda.current_stream().wait_stream(side)
            else:
                got = a[off : off + 4001]
            dist.all_reduce(b[off : off + 4001], group=nccl_pg)
            if backend.fast_calls()[lamport] != calls + 1:
                raise AssertionError(f"lamport offset view {offsets} {dtype} async={async_op}: the kernel did not run")
            _close(f"lamport offset view {offsets} {dtype} async={async_op}", got, b[off : off + 4001])
            if not torch.equal(a[:off], x[:off]) or not torch.equal(a[off + 4001 :], x[off + 4001 :]):
                raise AssertionError(f"lamport offset view {offsets} {dtype}: wrote outside the view")
            checks += 1
    # ops the kernel lacks: NCCL serves them, still correct
    calls = backend.fast_calls()[lamport]
    x = torch.randn(4097, generator=gen, device="cuda")
    a, b = x.clone(), x.clone()
    dist.all_reduce(a, op=R.MAX, group=group)
    dist.all_reduce(b, op=R.MAX, group=nccl_pg)
    if not torch.equal(a, b) or backend.fast_calls()[lamport] != calls:
        raise AssertionError("lamport: MAX took the kernel")
    # dtypes the kernel lacks (AVG of integers included) and a tensor larger than the buffer
    # (SMDDP_LAMPORT_BYTES, 8 MiB in the test): NCCL on every rank, with NCCL's result or error
    region = int(os.environ.get("SMDDP_LAMPORT_BYTES", str(16 << 20)))
    for name, make, op in (("float64 sum", lambda: torch.randn(999, generator=gen, device="cuda").double(), R.SUM),
                           ("int32 avg", lambda: torch.arange(1000, device="cuda", dtype=torch.int32) * (rank + 1),
                            R.AVG),
                           ("larger than the buffer", lambda: torch.randn(region // 4 + 4, generator=gen,
                                                                          device="cuda"), R.SUM)):
        x = make()
        results = []
        for pg in (group, nccl_pg):
            t = x.clone()
            try:
                dist.all_reduce(t, op=op, group=pg)
                results.append(t)
            except (RuntimeError, ValueError) as exc:
                results.append(type(exc).__name__)
        if isinstance(results[0], torch.Tensor) and isinstance(results[1], torch.Tensor):
            if results[0].is_floating_point():
                _close(f"lamport fallback {name}", results[0], results[1])
            elif not torch.equal(results[0], results[1]):
                raise AssertionError(f"lamport fallback {name}: differs from NCCL")
        elif results[0] != results[1]:
            raise AssertionError(f"lamport fallback {name}: smddp {results[0]} vs NCCL {results[1]}")
    if backend.fast_calls()[lamport] != calls:
        raise AssertionError("lamport: a dtype it lacks or a tensor larger than its buffer took the kernel")
    # an asynchronous call's future chained with then(): the callback sees the reduced tensor
    x = torch.randn(3000, generator=gen, device="cuda")
    ref = x.clone()
    chained = dist.all_reduce(x, group=group, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    got = chained.wait()
    dist.all_reduce(ref, group=nccl_pg)
    _close("async future then()", got, ref * 2)
    checks += 5
    # many calls back to back, sizes and dtypes mixed, no sync in between: each slot is reused
    # only when it is safe (a reuse too early shows as wrong sums)
    inputs = [torch.randn(int(n), generator=gen, device="cuda").to(dt)
              for n, dt in zip(torch.randint(1, 70000, (300,), generator=torch.Generator().manual_seed(9)).tolist(),
                               [torch.float32, torch.bfloat16, torch.float16] * 100, strict=True)]
    outs = [t.clone() for t in inputs]
    for t in outs:
        dist.all_reduce(t, group=group)
    refs = [t.clone() for t in inputs]
    for t in refs:
        dist.all_reduce(t, group=nccl_pg)
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        _close(f"back-to-back call {i} ({o.dtype}, n={o.numel()})", o, r)
    checks += len(outs)
    # async: results waited on by a side stream and through the future; two issuing streams
    side, other = torch.cuda.Stream(), torch.cuda.Stream()
    xs = [torch.randn(20000 + i, generator=gen, device="cuda") for i in range(8)]
    refs = [x.clone() for x in xs]
    works = []
    for i, x in enumerate(xs):
        with torch.cuda.stream(other if i % 2 else torch.cuda.current_stream()):
            if i % 2:
                other.wait_stream(torch.cuda.default_stream())
            works.append(dist.all_reduce(x, group=group, async_op=i % 3 != 0))
    for w in works:
        if w is not None:
            with torch.cuda.stream(side):
                w.wait()
    torch.cuda.current_stream().wait_stream(other)
    torch.cuda.current_stream().wait_stream(side)
    for i, r in enumerate(refs):
        dist.all_reduce(r, group=nccl_pg)
        _close(f"async/two-stream call {i}", xs[i], r)
    x = torch.randn(5000, generator=gen, device="cuda")
    ref = x.clone()
    fut = dist.all_reduce(x, op=R.AVG, group=group, async_op=True).get_future()
    got = fut.wait()[0]
    dist.all_reduce(ref, op=R.AVG, group=nccl_pg)
    _close("async future", got, ref)
    checks += len(xs) + 1
    # CUDA graphs: one call captured alone (replays reuse its arguments: the slot must come from
    # the device counter) and a chain of calls, each replayed between eager calls
    for n_calls in (1, 6):
        static = torch.zeros(12288, device="cuda", dtype=torch.bfloat16)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                dist.all_reduce(static, group=group)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(n_calls):
                dist.all_reduce(static, group=group)
                static.mul_(0.5)
        for step in range(5):
            fresh = torch.randn(static.numel(), generator=gen, device="cuda").to(static.dtype)
            static.copy_(fresh)
            graph.replay()
            graph.replay()
            eager = fresh.clone()
            dist.all_reduce(eager, group=group)  # an eager call between replays
            want = fresh.clone()
            for _ in range(2 * n_calls):
                dist.all_reduce(want, group=nccl_pg)
                want.mul_(0.5)
            _close(f"graph x{n_calls} replay {step}", static, want)
            checks += 1
    # asynchronous and synchronous calls mixed inside one capture (DDP buckets beside a loss
    # all-reduce): every captured call must run after the one before it, never beside it
    a = torch.zeros(20000, device="cuda")
    b = torch.zeros(3000, device="cuda", dtype=torch.bfloat16)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        work = dist.all_reduce(a, group=group, async_op=True)
        dist.all_reduce(b, group=group)
        work.wait()
        work = dist.all_reduce(b, group=group, async_op=True)
        dist.all_reduce(a, group=group)
        work.wait()
    for step in range(3):
        fresh_a = torch.randn(a.numel(), generator=gen, device="cuda")
        fresh_b = torch.randn(b.numel(), generator=gen, device="cuda").to(b.dtype)
        a.copy_(fresh_a)
        b.copy_(fresh_b)
        graph.replay()
        for t in (fresh_a, fresh_b):
            for _ in range(2):
                dist.all_reduce(t, group=nccl_pg)
        _close(f"graph async+sync replay {step} (fp32)", a, fresh_a)
        _close(f"graph async+sync replay {step} (bf16)", b, fresh_b)
        checks += 1
    # a group whose first Lamport call comes inside capture: NCCL serves the captured call (the
    # set-up cannot run there); the first eager call then sets the kernel up
    fresh_group = dist.new_group(backend="smddp")
    fresh_backend = native_backend.native_backend_of(fresh_group)
    force_path(fresh_group, "all_reduce", "lamport")
    warm = torch.ones(4, device="cuda", dtype=torch.int32)
    dist.all_reduce(warm, group=fresh_group)  # integers: NCCL, which sets its communicator up eagerly
    static = torch.zeros(4096, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist.all_reduce(static, group=fresh_group)
    if fresh_backend.fast_calls()[lamport] != 0:
        raise AssertionError("a Lamport call ran inside capture before the group's set-up")
    fresh = torch.randn(static.numel(), generator=gen, device="cuda")
    static.copy_(fresh)
    graph.replay()
    eager = fresh.clone()
    dist.all_reduce(eager, group=fresh_group)
    dist.all_reduce(fresh, group=nccl_pg)
    _close("captured before set-up (NCCL)", static, fresh)
    _close("eager after a capture before set-up", eager, fresh)
    if fresh_backend.fast_calls()[lamport] != 1:
        raise AssertionError("the first eager Lamport call after capture did not take the kernel")
    # two groups of the same ranks, calls interleaved without a sync, some asynchronous: each
    # group has its own buffer and counter, so neither disturbs the other
    inputs = [torch.randn(1000 + 37 * i, generator=gen, device="cuda") for i in range(24)]
    outs = [t.clone() for t in inputs]
    works = [dist.all_reduce(t, group=(group, fresh_group)[i % 2], async_op=i % 3 == 0) for i, t in enumerate(outs)]
    for w in works:
        if w is not None:
            w.wait()
    for i, (o, t) in enumerate(zip(outs, inputs, strict=True)):
        dist.all_reduce(t, group=nccl_pg)
        _close(f"two groups interleaved, call {i}", o, t)
    if fresh_backend.fast_calls()[lamport] != 13:
        raise AssertionError(f"two groups interleaved: {fresh_backend.fast_calls()[lamport] - 1} kernel calls, want 12")
    checks += 3
    force_path(group, "all_reduce", None)
    torch.cuda.synchronize()
    if backend.lamport_timeouts() != 0 or fresh_backend.lamport_timeouts() != 0:
        raise AssertionError("a Lamport call timed out waiting for a peer")
    print(f"rank {rank}: {checks} lamport checks equal NCCL (kernel calls {backend.fast_calls()[lamport]})")


def scenario_reinit(rank: int, ws: int, device: str) -> None:
    """CUDA only, last of a launch: destroy_process_group() and init again in the same process (as
    in-process restarts and test drivers do); the new group's Lamport kernel serves its calls
    (its symmetric-memory helper group, named like the first, must not be the torn-down one)."""
    from smdist_launcher.smddp import force_path, native_backend

    dist.destroy_process_group()
    dist.init_process_group("smddp", init_method=f"file://{sys.argv[4]}.again", rank=rank, world_size=ws,
                            timeout=timedelta(seconds=120))
    group = dist.group.WORLD
    backend = native_backend.native_backend_of(group)
    if backend is None:
        raise AssertionError(f"no native backend after re-init: {native_backend.unavailable_reason()}")
    force_path(group, "all_reduce", "lamport")
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.full((5000,), float(rank + 1), device="cuda", dtype=dtype)
        dist.all_reduce(x, group=group)
        check(f"lamport after re-init {dtype}", x, torch.full((5000,), ws * (ws + 1) / 2))
    if backend.fast_calls()[4] != 2:  # routing.NATIVE_PATH_CODES["lamport"]
        raise AssertionError(f"after re-init the Lamport kernel did not run: fast calls {backend.fast_calls()}")
    force_path(group, "all_reduce", None)
    print(f"rank {rank}: lamport after re-init ok")


def scenario_lamport_timeout(rank: int, ws: int, device: str) -> None:
    """CUDA only, a launch of its own (it stops rank 0's CUDA context): rank 0 makes a Lamport call
    its peers skip. It must stop with a message (SMDDP_LAMPORT_TIMEOUT_S, short in the test), not
    hang, and the process must still tear its group down and end."""
    from smdist_launcher.smddp import force_path

    group = dist.group.WORLD
    force_path(group, "all_reduce", "lamport")
    x = torch.ones(4096, device="cuda")
    dist.all_reduce(x, group=group)  # every rank: the collective set-up
    torch.cuda.synchronize()
    check("lamport before the lost peer", x, torch.full((4096,), float(ws)))
    store = dist.distributed_c10d._get_default_store()
    if rank != 0:
        # keep this rank's buffer mapped until rank 0's kernel has stopped
        store.wait(["smddp-test/timed-out"], timedelta(seconds=50))
        return
    try:
        dist.all_reduce(x, group=group)  # the peers never come
        torch.cuda.synchronize()
    except RuntimeError as exc:
        print(f"rank 0: the lost peer stopped the context: {str(exc).strip().splitlines()[0]}", flush=True)
    else:
        raise AssertionError("a Lamport call without its peers completed")
    store.set("smddp-test/timed-out", "1")
    dist.destroy_process_group()
    print("rank 0: torn down after the timeout", flush=True)
    import ctypes

    ctypes.CDLL(None).fflush(None)  # the driver's device printf/assert lines sit in C stdio buffers
    os._exit(0)  # interpreter finalization would free CUDA memory of a stopped context


def scenario_ce_edges(rank: int, ws: int, device: str) -> None:
    from ce_edge_scenarios import scenario_ce_edges as run  # beside this script (its folder is on sys.path)

    run(rank, ws, device)


def scenario_ce_one_rank_set_up_fails(rank: int, ws: int, device: str) -> None:
    from ce_edge_scenarios import scenario_ce_one_rank_set_up_fails as run

    run(rank, ws, device)


SCENARIOS = {"lamport": scenario_lamport, "reinit": scenario_reinit, "lamport_timeout": scenario_lamport_timeout,
             "funcol": scenario_funcol, "fast_paths": scenario_fast_paths, "collectives": scenario_collectives,
             "ddp": scenario_ddp, "fsdp2": scenario_fsdp2, "native": scenario_native, "ce_edges": scenario_ce_edges,
             "ce_one_rank_set_up_fails": scenario_ce_one_rank_set_up_fails}


def main() -> None:
    import faulthandler

    faulthandler.enable()  # a native crash still shows the Python line that caused it
    scenario, rank, ws, init_file, device = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    if device == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "src"))
    import smdist_launcher.smddp  # noqa: F401  (registers "smddp")

    dist.init_process_group("smddp", init_method=f"file://{init_file}", rank=rank, world_size=ws,
                            timeout=timedelta(seconds=120))
    try:
        for name in scenario.split(","):
            SCENARIOS[name](rank, ws, device)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
