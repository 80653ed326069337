"""Benchmark: delivering a large model folder (issue 32, backends/toolkit/packing.py).

Two model folders of --size-gib each (several shard files, like a sharded checkpoint): incompressible bytes, and fp32
weights (normal(0, 0.02), what an initialised or trained layer holds). For each, in the same run:

- today's way: tarfile "w:gz" level 1 (stdlib zlib, one thread), as outputs.pack_merged did before;
- the new way: packing.pack (ISA-L deflate on threads when `isal` is installed, streamed);
- uncompressed delivery (CompressionType NONE): packing.copy_merged into a folder, against a plain copy
  (shutil.copytree) of the same folder.

    .venv/bin/python benchmarks/output_packing.py --size-gib 4 [--out results.json]

Targets: compressed >= 3x faster than today's way; uncompressed within 1.5x of the plain copy.
Page cache: each measurement reads a folder just written, as after a job (the model is usually still cached).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from smdist_launcher.backends.toolkit import packing

SHARDS = 8


def make_folder(path: Path, size: int, kind: str) -> None:
    import numpy as np

    path.mkdir(parents=True)
    rng = np.random.default_rng(0)
    per = size // SHARDS
    for i in range(SHARDS):
        with open(path / f"model-{i:05d}-of-{SHARDS:05d}.bin", "wb") as f:
            left = per
            while left:
                n = min(left, 64 << 20)
                if kind == "random":
                    f.write(os.urandom(n))
                else:
                    f.write((rng.standard_normal(n // 4, dtype=np.float32) * 0.02).tobytes())
                left -= n


def todays_way(folder: Path, tar_path: Path) -> None:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    with tarfile.open(tar_path, "w:gz", compresslevel=1) as tar:
        for p in files:
            tar.add(p, arcname=p.relative_to(folder).as_posix(), recursive=False)


def timed(fn, *args, **kwargs) -> float:  # type: ignore[no-untyped-def]
    os.sync()
    start = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-gib", type=float, default=4.0)
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temp folder)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    load = os.getloadavg()[0]
    size = int(args.size_gib * (1 << 30))
    work = Path(tempfile.mkdtemp(prefix="smdist-packing-", dir=args.work))
    results: dict[str, dict[str, float]] = {}
    try:
        for kind in ("random", "fp32"):
            src = work / kind / "model"
            make_folder(src, size, kind)
            r: dict[str, float] = {}
            r["today_s"] = timed(todays_way, src, work / kind / "today.tar.gz")
            today_size = (work / kind / "today.tar.gz").stat().st_size
            (work / kind / "today.tar.gz").unlink()
            r["new_s"] = timed(packing.pack, [packing.Folder(src)], work / kind / "new.tar.gz")
            new_size = (work / kind / "new.tar.gz").stat().st_size
            (work / kind / "new.tar.gz").unlink()
            # one thread: the deflate alone (on a shared machine more threads also win a bigger share of the CPU)
            r["new_1thread_s"] = timed(packing.pack, [packing.Folder(src)], work / kind / "new1.tar.gz", threads=1)
            (work / kind / "new1.tar.gz").unlink()
            r["plain_copy_s"] = timed(shutil.copytree, src, work / kind / "plain-copy")
            shutil.rmtree(work / kind / "plain-copy")
            r["uncompressed_s"] = timed(packing.copy_merged, [packing.Folder(src)], work / kind / "delivered")
            shutil.rmtree(work / kind / "delivered")
            r.update(today_ratio=round(today_size / size, 3), new_ratio=round(new_size / size, 3),
                     speedup=round(r["today_s"] / r["new_s"], 2),
                     speedup_1thread=round(r["today_s"] / r["new_1thread_s"], 2),
                     uncompressed_vs_copy=round(r["uncompressed_s"] / r["plain_copy_s"], 2))
            results[kind] = {k: round(v, 2) for k, v in r.items()}
            print(kind, json.dumps(results[kind]), flush=True)
            shutil.rmtree(work / kind)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": platform.node(),
            "cores": os.cpu_count(), "size_gib": args.size_gib, "shards": SHARDS, "compressor": packing.compressor(),
            "python": platform.python_version(), "load_avg_at_start": round(load, 1),
            "load_avg_at_end": round(os.getloadavg()[0], 1)}
    print(json.dumps({"meta": meta, "results": results}, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
