"""smddp vs NCCL on one NVLink node, side by side in the same run.

    torchrun --nproc_per_node=4 benchmarks/collectives.py --out results.json [--quick]
    torchrun --nproc_per_node=4 benchmarks/collectives.py --probe --out probe.json   # path variants
    python benchmarks/collectives.py --summarize results.json probe.json             # markdown
    bash benchmarks/smddp_device_suite.sh full     # GPU tests + both sweeps, one device call

Measures, for bf16 and fp32:
  * busbw of AllGather / AllReduce / ReduceScatter at 1 MiB .. 1 GiB,
  * latency of the same at 8 KiB .. 4 MiB,
  * every smddp path forced (ce, one_shot, two_shot) next to the routed default, which is
    the data the routing table in src/smdist_launcher/smddp/routing.py is chosen from,
  * the slowdown of a bf16 GEMM running while each backend all-gathers on another stream.
Timing: CUDA events around a loop of back-to-back eager calls (what a training step issues),
median of several repetitions, after warm-up; AllReduce up to 4 MiB also as 20 calls captured
in one CUDA graph and replayed (``--no-graph`` skips that). Sizes are output bytes for AllGather, tensor
bytes for AllReduce and input bytes for ReduceScatter (nccl-tests' convention).
busbw factors: AllReduce 2(n-1)/n, AllGather and ReduceScatter (n-1)/n.
Stdlib + torch only (runs on the GPU image).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

KiB, MiB, GiB = 1024, 1024**2, 1024**3
BUSBW_SIZES = [1 * MiB, 4 * MiB, 16 * MiB, 32 * MiB, 64 * MiB, 128 * MiB, 256 * MiB, 512 * MiB, 1 * GiB]
LAT_SIZES = [8 * KiB, 32 * KiB, 128 * KiB, 512 * KiB, 1 * MiB, 2 * MiB, 4 * MiB]
# smddp paths timed on their own (path -> largest size tried), next to the routed default
FORCED = {"all_gather": {"ce": 1 * GiB},
          "all_reduce": {"one_shot": 4 * MiB, "two_shot": 64 * MiB, "lamport": 64 * MiB}, "reduce_scatter": {}}


def busbw_factor(coll: str, n: int) -> float:
    return 2 * (n - 1) / n if coll == "all_reduce" else (n - 1) / n


class Case:
    """Buffers and one call of one collective on one group."""

    def __init__(self, coll: str, nbytes: int, dtype: torch.dtype, ws: int) -> None:
        esize = torch.tensor([], dtype=dtype).element_size()
        numel = max(ws, nbytes // esize // ws * ws)
        self.coll = coll
        if coll == "all_gather":
            self.inp = torch.randn(numel // ws, device="cuda").to(dtype)
            self.out = torch.empty(numel, device="cuda", dtype=dtype)
        elif coll == "reduce_scatter":
            self.inp = torch.randn(numel, device="cuda").to(dtype)
            self.out = torch.empty(numel // ws, device="cuda", dtype=dtype)
        else:
            self.inp = torch.randn(numel, device="cuda").to(dtype) / ws
            self.out = self.inp

    def run(self, group: dist.ProcessGroup) -> None:
        if self.coll == "all_gather":
            dist.all_gather_into_tensor(self.out, self.inp, group=group)
        elif self.coll == "reduce_scatter":
            dist.reduce_scatter_tensor(self.out, self.inp, group=group)
        else:
            dist.all_reduce(self.inp, group=group)


def time_per_call(fn, budget_s: float = 0.015, reps: int = 5) -> float:
    """Median seconds per call of ``fn`` (events around a loop, loop length fit to the budget)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    # every rank must run the same number of calls: agree on the slowest estimate
    once_t = torch.tensor([max(time.perf_counter() - t0, 1e-6)], device="cuda")
    dist.all_reduce(once_t, op=dist.ReduceOp.MAX, group=_NCCL)
    once = float(once_t.item())
    iters = int(min(200, max(3, budget_s / once)))
    samples = []
    for _ in range(reps):
        dist.barrier(group=_SYNC)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / iters)
    # every rank must agree on the number: take the slowest rank's median
    t = torch.tensor([statistics.median(samples)], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=_NCCL)
    return float(t.item())


GRAPH_MAX = 4 * MiB  # AllReduce sizes also timed inside a CUDA graph


def time_in_graph(fn, calls: int = 20, reps: int = 5) -> float:
    """Median seconds per call of ``fn`` captured ``calls`` times into one CUDA graph and replayed
    (what a captured training step issues: no host time per call at all)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream, as torch's graph docs advise
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        dist.barrier(group=_SYNC)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / calls)
    del graph
    t = torch.tensor([statistics.median(samples)], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=_NCCL)
    return float(t.item())


def sweep(ws: int, sizes: list[int], dtypes: list[torch.dtype], smddp_pg, nccl_pg, force_path) -> list[dict]:
    rows = []
    for coll in ("all_gather", "all_reduce", "reduce_scatter"):
        for dtype in dtypes:
            for nbytes in sizes:
                case = Case(coll, nbytes, dtype, ws)
                row = {"collective": coll, "dtype": str(dtype).replace("torch.", ""), "bytes": nbytes, "world_size": ws}
                variants = [("nccl", nccl_pg, None), ("smddp", smddp_pg, None)]
                variants += [(f"smddp:{p}", smddp_pg, p) for p, limit in FORCED[coll].items() if nbytes <= limit]
                for label, group, forced in variants:
                    if forced is not None:
                        force_path(smddp_pg, coll, forced)
                    try:
                        row[label] = time_per_call(functools.partial(case.run, group))
                        if coll == "all_reduce" and nbytes <= GRAPH_MAX and not _NO_GRAPH:
                            row["graph_" + label] = time_in_graph(functools.partial(case.run, group))
                    finally:
                        if forced is not None:
                            force_path(smddp_pg, coll, None)
                measured = case.inp if coll == "reduce_scatter" else case.out
                real = measured.numel() * measured.element_size()
                row["bytes"] = real
                for label in [v[0] for v in variants]:
                    row[f"busbw_{label}"] = real / row[label] * busbw_factor(coll, ws) / 1e9
                rows.append(row)
                if dist.get_rank() == 0:
                    print(json.dumps(row), flush=True)
                del case
                torch.cuda.empty_cache()
    return rows


def gemm_overlap(ws: int, smddp_pg, nccl_pg, nbytes: int = 256 * MiB) -> dict:
    """bf16 8192^3 GEMMs on one stream while another stream all-gathers nbytes (bf16) back to back."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    case = Case("all_gather", nbytes, torch.bfloat16, ws)
    gemm_stream, comm_stream = torch.cuda.Stream(), torch.cuda.Stream()
    n_gemm = 30

    def gemms() -> tuple[torch.cuda.Event, torch.cuda.Event]:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(gemm_stream):
            start.record()
            for _ in range(n_gemm):
                torch.mm(a, b)
            end.record()
        return start, end

    result = {}
    for _ in range(3):
        torch.mm(a, b)
    torch.cuda.synchronize()
    # Fixed call counts (every rank must issue the same collectives): the all-gather loop is
    # queued first and lasts longer than the GEMM loop, so every GEMM runs under communication.
    t_ag = time_per_call(functools.partial(case.run, nccl_pg))
    t_mm = time_per_call(lambda: torch.mm(a, b))
    n_comm = int(min(400, max(8, 1.6 * n_gemm * t_mm / t_ag)))
    for label, group in (("alone", None), ("nccl", nccl_pg), ("smddp", smddp_pg)):
        times, comm_times = [], []
        for _ in range(3):
            dist.barrier(group=_SYNC)
            torch.cuda.synchronize()
            if group is not None:
                cs, ce = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                with torch.cuda.stream(comm_stream):
                    cs.record()
                    for _ in range(n_comm):
                        case.run(group)
                    ce.record()
            start, end = gemms()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / n_gemm)
            if group is not None:
                comm_times.append(cs.elapsed_time(ce) / n_comm)
        comm = statistics.median(comm_times) if comm_times else 0.0
        t = torch.tensor([statistics.median(times), comm], device="cuda")
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=_NCCL)
        result[f"gemm_ms_{label}"] = t[0].item()
        if group is not None:
            result[f"allgather_ms_{label}"] = t[1].item()
    result["allgather_calls"] = n_comm
    flops = 2 * 8192**3
    result["gemm_tflops_alone"] = flops / (result["gemm_ms_alone"] / 1e3) / 1e12
    for label in ("nccl", "smddp"):
        result[f"gemm_slowdown_{label}"] = result[f"gemm_ms_{label}"] / result["gemm_ms_alone"] - 1
    result["allgather_bytes"] = nbytes
    return result


_SYNC = None
_NCCL = None
_NO_GRAPH = False


def cpu_issue_time(fn, iters: int = 20) -> float:
    """Host seconds to issue one call (no sync inside the loop): the floor of eager latency."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    t = (time.perf_counter() - t0) / iters
    torch.cuda.synchronize()
    return t


def probe(ws: int, smddp_pg, nccl_pg, force_path) -> list[dict]:
    """Variants of the fast paths side by side (data for the routing table and defaults)."""
    pg = smddp_pg
    rows = []
    cp = pg.cuda_path
    force_path(pg, "all_gather", "ce")
    Case("all_gather", 1 * MiB, torch.bfloat16, ws).run(pg)  # builds the fast paths
    ag = cp.allgather_ce
    lib = ag.lib  # the native helper, when SMDDP_NATIVE=1 and it built
    variants = {"parallel/memcpy": (False, False, None), "serial/memcpy": (True, False, None)}
    if lib is not None:
        variants.update({"native/parallel": (False, False, lib), "native/serial": (True, False, lib)})
    for nbytes in (1 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, 1 * GiB):
        case = Case("all_gather", nbytes, torch.bfloat16, ws)
        row = {"collective": "all_gather", "bytes": nbytes, "world_size": ws}
        row["nccl"] = time_per_call(functools.partial(case.run, nccl_pg))
        row["cpu_nccl"] = cpu_issue_time(functools.partial(case.run, nccl_pg))
        for label, (serial, kernel, native_lib) in variants.items():
            ag.serial, ag.kernel_stage, ag.lib = serial, kernel, native_lib
            row[label] = time_per_call(functools.partial(case.run, pg))
            row["cpu_" + label] = cpu_issue_time(functools.partial(case.run, pg))
        rows.append(row)
        if dist.get_rank() == 0:
            print(json.dumps(row), flush=True)
        del case
    ag.lib = lib
    if dist.get_rank() == 0:
        from smdist_launcher.smddp import native

        print(json.dumps({"native_helper": lib is not None, "why_not": native.unavailable_reason()}), flush=True)
    force_path(pg, "all_gather", None)
    if os.environ.get("SMDDP_PROBE_AG_ONLY") == "1":
        ag.serial = ws > 2
        rows.append({"collective": "gemm_overlap", "native": lib is not None, **gemm_overlap(ws, smddp_pg, nccl_pg)})
        if dist.get_rank() == 0:
            print(json.dumps(rows[-1]), flush=True)
        return rows
    force_path(pg, "all_reduce", "one_shot")
    Case("all_reduce", 64 * KiB, torch.bfloat16, ws).run(pg)
    ar = cp.allreduce_symm
    for nbytes in (8 * KiB, 64 * KiB, 512 * KiB, 2 * MiB):
        case = Case("all_reduce", nbytes, torch.bfloat16, ws)
        row = {"collective": "all_reduce", "bytes": nbytes, "world_size": ws}
        row["nccl"] = time_per_call(functools.partial(case.run, nccl_pg))
        row["cpu_nccl"] = cpu_issue_time(functools.partial(case.run, nccl_pg))
        for path in ("one_shot", "two_shot"):
            force_path(pg, "all_reduce", path)
            for stage in ("memcpy", "kernel", "fused"):
                if path == "two_shot" and stage == "fused":
                    continue
                ar.stage = stage
                label = f"{path}/{stage}"
                row[label] = time_per_call(functools.partial(case.run, pg))
                row["cpu_" + label] = cpu_issue_time(functools.partial(case.run, pg))
        rows.append(row)
        if dist.get_rank() == 0:
            print(json.dumps(row), flush=True)
    force_path(pg, "all_reduce", None)
    # the symmetric-memory barrier alone
    handle = ag.buffers.get(1).handles[0]
    row = {"collective": "symm_barrier", "bytes": 0, "world_size": ws}
    row["barrier"] = time_per_call(lambda: handle.barrier(channel=0))
    row["cpu_barrier"] = cpu_issue_time(lambda: handle.barrier(channel=0))
    rows.append(row)
    if dist.get_rank() == 0:
        print(json.dumps(row), flush=True)
    return rows


AG_PIPELINE_SIZES = [32 * MiB, 64 * MiB, 128 * MiB, 256 * MiB, 512 * MiB, 1 * GiB]
AG_PIPELINE_VARIANTS = {"ce": (1, None), "ce:c2": (2, 4 * MiB), "ce:c4": (4, 4 * MiB), "ce:c8": (8, 4 * MiB)}


def ce_engine(group):
    """The copy-engine AllGather object serving ``group`` (native backend or Python group), built."""
    from smdist_launcher.smddp import native_backend

    native = native_backend.native_backend_of(group)
    engine = native.helper().allgather if native is not None else group.cuda_path.allgather_ce
    if engine is None:
        raise RuntimeError("the copy-engine AllGather was not set up (fast paths off on this machine?)")
    return engine


def ag_pipeline(ws: int, smddp_pg, nccl_pg, force_path, passes: int = 3, variants: list[str] | None = None,
                dtypes: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float32)) -> list[dict]:
    """AllGather busbw, NCCL against the copy-engine path with its staging pipelined in 1/2/4/8 parts
    (fast_allgather.pipeline_parts), every variant timed in each of ``passes`` interleaved passes;
    the median pass is kept. Data for SMDDP_CE_CHUNKS' default and the AllGather routes."""
    force_path(smddp_pg, "all_gather", "ce")
    Case("all_gather", 1 * MiB, torch.bfloat16, ws).run(smddp_pg)  # sets the fast path up
    engine = ce_engine(smddp_pg)
    saved = (engine.chunks, engine.min_part)
    # "ce:default": the engine's own parts (SMDDP_CE_CHUNKS or DEFAULT_CHUNKS, MIN_PART), as routed calls run
    table = {**AG_PIPELINE_VARIANTS, "ce:default": saved}
    chosen = {label: table[label] for label in (variants or list(AG_PIPELINE_VARIANTS))}
    native = native_backend_of(smddp_pg)
    rows = []
    for dtype in dtypes:
        for nbytes in AG_PIPELINE_SIZES:
            if dtype == torch.float32 and not 64 * MiB <= nbytes <= 256 * MiB:
                continue  # a byte copy: fp32 only where the target is
            case = Case("all_gather", nbytes, dtype, ws)
            times: dict[str, list[float]] = {}
            host: dict[str, list[float]] = {}
            for _ in range(passes):
                times.setdefault("nccl", []).append(time_per_call(functools.partial(case.run, nccl_pg)))
                for label, (chunks, min_part) in chosen.items():
                    engine.chunks, engine.min_part = chunks, min_part or saved[1]
                    stats = list(native.ce_stats()) if native is not None and hasattr(native, "ce_stats") else None
                    times.setdefault(label, []).append(time_per_call(functools.partial(case.run, smddp_pg)))
                    if stats is not None:  # host time per call the C++ backend spent issuing it
                        now = native.ce_stats()
                        if now[0] > stats[0]:
                            host.setdefault(label, []).append((now[1] - stats[1]) / (now[0] - stats[0]) / 1e3)
            engine.chunks, engine.min_part = saved
            real = case.out.numel() * case.out.element_size()
            row = {"collective": "all_gather", "dtype": str(dtype).replace("torch.", ""), "bytes": real,
                   "world_size": ws}
            for label, values in host.items():
                row[f"host_us_{label}"] = round(statistics.median(values), 1)
            for label, values in times.items():
                row[label] = statistics.median(values)
                row[f"busbw_{label}"] = real / row[label] * busbw_factor("all_gather", ws) / 1e9
                row[f"spread_{label}"] = (max(values) - min(values)) / statistics.median(values)
            # the check that every rank really pipelined: the same bytes as NCCL
            ref = torch.empty_like(case.out)
            engine.chunks, engine.min_part = 4, 4 * MiB
            case.run(smddp_pg)
            engine.chunks, engine.min_part = saved
            dist.all_gather_into_tensor(ref, case.inp, group=nccl_pg)
            row["equal_nccl"] = bool(torch.equal(ref, case.out))
            rows.append(row)
            if dist.get_rank() == 0:
                print(json.dumps(row), flush=True)
            del case, ref
            torch.cuda.empty_cache()
    force_path(smddp_pg, "all_gather", None)
    return rows


def native_backend_of(group):
    from smdist_launcher.smddp import native_backend

    return native_backend.native_backend_of(group)


def summarize_ag_pipeline(rep: dict) -> str:
    rows = rep["ag_pipeline"]
    labels = ["nccl"] + [k[len("busbw_"):] for k in rows[0] if k.startswith("busbw_ce")] if rows else ["nccl"]
    lines = [f"\n### AllGather, copy engines pipelined in parts vs NCCL, {rep['world_size']} GPUs ({rep['device']}, "
             f"torch {rep['torch']}, NCCL {rep['nccl']}, {rep['date']}): busbw GB/s (ratio to NCCL)\n",
             "| dtype | size | " + " | ".join(labels) + " | equal NCCL |", "|---" * (len(labels) + 3) + "|"]
    for r in rows:
        cells = [f"{r['busbw_' + k]:.0f}" + ("" if k == "nccl" else f" ({r['busbw_' + k] / r['busbw_nccl']:.2f}x)")
                 for k in labels]
        host = ", ".join(f"{k[len('host_us_'):]} {v} us" for k, v in r.items() if k.startswith("host_us_"))
        lines.append(f"| {r['dtype']} | {fmt_size(r['bytes'])} | " + " | ".join(cells) + f" | {r['equal_nccl']} |"
                     + (f" host per call: {host}" if host else ""))
    return "\n".join(lines)


def fmt_size(n: int) -> str:
    return f"{n // GiB} GiB" if n >= GiB else f"{n // MiB} MiB" if n >= MiB else f"{n // KiB} KiB"


def summarize_probe(rep: dict) -> str:
    """Probe rows: device time per call (us) and host issue time per call (us) per variant."""
    lines = [f"\n### Fast-path variants, {rep['world_size']} GPUs ({rep['date']}): us per call, device (host issue)\n"]
    for coll in ("all_gather", "all_reduce"):
        rows = [r for r in rep["probe"] if r.get("collective") == coll]
        if not rows:
            continue
        labels = [k for k in rows[0] if k not in ("collective", "bytes", "world_size") and not k.startswith("cpu_")]
        lines.append("| " + coll + " size | " + " | ".join(labels) + " |")
        lines.append("|---" * (len(labels) + 1) + "|")
        for r in rows:
            cells = [f"{r[k] * 1e6:.0f} ({r['cpu_' + k] * 1e6:.0f})" for k in labels]
            lines.append(f"| {fmt_size(r['bytes'])} | " + " | ".join(cells) + " |")
        lines.append("")
    for r in rep["probe"]:
        if r.get("collective") == "symm_barrier":
            lines.append(f"Symmetric-memory barrier alone: {r['barrier'] * 1e6:.1f} us per call "
                         f"({r['cpu_barrier'] * 1e6:.1f} us host).")
    return "\n".join(lines)


def summarize(paths: list[str]) -> str:
    """Markdown tables (busbw >= 1 MiB, latency <= 4 MiB) from one or more result files."""
    lines = []
    for path in paths:
        with open(path) as f:
            rep = json.load(f)
        ws = rep["world_size"]
        if "probe" in rep:
            lines.append(summarize_probe(rep))
            continue
        if "ag_pipeline" in rep:
            lines.append(summarize_ag_pipeline(rep))
            continue
        lines.append(f"\n### {ws} GPUs ({rep['device']}, torch {rep['torch']}, NCCL {rep['nccl']}, {rep['date']})\n")
        lines.append(f"smddp serves CUDA through: {rep.get('smddp_backend', 'python process group')}\n")
        lines.append("| collective | dtype | size | NCCL | smddp (routed) | ratio | forced paths | in a CUDA graph |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for row in rep["rows"]:
            forced = [k for k in row if k.startswith("smddp:")]
            if row["bytes"] >= MiB:
                unit = "GB/s busbw"
                n, s = row["busbw_nccl"], row["busbw_smddp"]
                def cell(k: str, row: dict = row) -> str:
                    return f"{row['busbw_' + k]:.0f}"
                ratio = s / n
            else:
                unit = "us"
                n, s = row["nccl"] * 1e6, row["smddp"] * 1e6
                def cell(k: str, row: dict = row) -> str:
                    return f"{row[k] * 1e6:.1f}"
                ratio = n / s
            graph = ""
            if "graph_nccl" in row:
                g_n, g_s = row["graph_nccl"] * 1e6, row["graph_smddp"] * 1e6
                graph = f"graph: NCCL {g_n:.1f}, smddp {g_s:.1f} us ({g_s / g_n:.2f}x time); "
                graph += ", ".join(f"{k[12:]} {row[k] * 1e6:.1f}" for k in row if k.startswith("graph_smddp:"))
            lines.append(
                f"| {row['collective']} | {row['dtype']} | {fmt_size(row['bytes'])} | {cell('nccl')} "
                f"| {cell('smddp')} {unit} "
                f"| {ratio:.2f}x | " + ", ".join(f"{k[6:]} {cell(k)}" for k in forced) + f" | {graph} |"
            )
        g = rep.get("gemm_overlap")
        if g:
            lines.append(
                f"\nGEMM (bf16 8192^3, {g['gemm_tflops_alone']:.0f} TFLOP/s alone) slowdown while all-gathering "
                f"{fmt_size(g['allgather_bytes'])} bf16: NCCL {100 * g['gemm_slowdown_nccl']:.1f}% "
                f"(AG {g['allgather_ms_nccl']:.2f} ms), smddp {100 * g['gemm_slowdown_smddp']:.1f}% "
                f"(AG {g['allgather_ms_smddp']:.2f} ms)"
            )
    return "\n".join(lines)


def main() -> None:
    global _SYNC, _NCCL, _NO_GRAPH
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--summarize", nargs="+", metavar="RESULT_JSON", help="print markdown tables and exit")
    parser.add_argument("--quick", action="store_true", help="few sizes, bf16 only (smoke check)")
    parser.add_argument("--no-gemm", action="store_true")
    parser.add_argument("--probe", action="store_true", help="time fast-path variants (staging, stream layout)")
    parser.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph AllReduce timings")
    parser.add_argument("--ag-pipeline", action="store_true",
                        help="only AllGather 32 MiB-1 GiB: NCCL vs the copy engines pipelined in 1/2/4/8 parts")
    parser.add_argument("--ag-variants", default="",
                        help="with --ag-pipeline: comma-separated among ce, ce:c2, ce:c4, ce:c8, ce:default "
                             "(the engine's own parts, as routed calls run); default ce..ce:c8")
    parser.add_argument("--ag-dtypes", default="bfloat16,float32", help="with --ag-pipeline: dtypes")
    parser.add_argument("--ag-passes", type=int, default=3, help="with --ag-pipeline: interleaved passes")
    args = parser.parse_args()
    if args.summarize:
        print(summarize(args.summarize))
        return
    if not args.out:
        parser.error("--out is required for a measurement run")
    _NO_GRAPH = args.no_graph

    import faulthandler

    faulthandler.enable()
    import smdist_launcher.smddp  # noqa: F401  registers "smddp"
    from smdist_launcher.smddp import force_path

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("smddp")
    ws = dist.get_world_size()
    smddp_pg = dist.group.WORLD
    _NCCL = nccl_pg = dist.new_group(backend="nccl")
    _SYNC = dist.new_group(backend="gloo")

    dtypes = [torch.bfloat16] if args.quick else [torch.bfloat16, torch.float32]
    lat = [8 * KiB, 128 * KiB, 512 * KiB] if args.quick else LAT_SIZES
    big = [16 * MiB, 64 * MiB, 256 * MiB] if args.quick else BUSBW_SIZES
    sizes = sorted(set(lat + big))
    report = {
        "world_size": ws,
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "env": {k: os.environ.get(k) for k in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
                                               "SMDDP_CE_SPLITS", "SMDDP_CE_CHUNKS", "SMDDP_NATIVE_BACKEND",
                                               "SMDDP_LAMPORT_BYTES")},
    }
    from smdist_launcher.smddp import native_backend

    native = native_backend.native_backend_of(smddp_pg) is not None
    report["lamport_kernel"] = bool(getattr(native_backend._module, "LAMPORT", False))
    report["smddp_backend"] = "native C++ backend" if native else (
        f"python process group ({native_backend.unavailable_reason() or 'native backend not tried'})")
    if dist.get_rank() == 0:
        print(json.dumps({"smddp_backend": report["smddp_backend"]}), flush=True)
    if args.probe or args.ag_pipeline:
        if args.ag_pipeline:
            report["ag_pipeline"] = ag_pipeline(
                ws, smddp_pg, nccl_pg, force_path, passes=args.ag_passes,
                variants=[v for v in args.ag_variants.split(",") if v] or None,
                dtypes=tuple(getattr(torch, d) for d in args.ag_dtypes.split(",") if d))
        else:
            report["probe"] = probe(ws, smddp_pg, nccl_pg, force_path)
        if dist.get_rank() == 0:
            with open(args.out, "w") as f:
                json.dump(report, f, indent=1)
        dist.barrier(group=_SYNC)
        dist.destroy_process_group()
        return
    report["rows"] = sweep(ws, sizes, dtypes, smddp_pg, nccl_pg, force_path)
    if not args.no_gemm:
        report["gemm_overlap"] = gemm_overlap(ws, smddp_pg, nccl_pg)
        if dist.get_rank() == 0:
            print(json.dumps(report["gemm_overlap"]), flush=True)
    if dist.get_rank() == 0:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    dist.barrier(group=_SYNC)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
