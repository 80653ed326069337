"""Local-mode overhead: from fit() to the first line of user code, and fit()'s total time for
an empty script, on 1x1 and 2x2 simulated hosts x processes, with torchrun and with mpirun.

    .venv/bin/python benchmarks/local_overhead.py [--repeat 3] [--json FILE]

The script's first line stamps time.time() into a file per rank (before any import), so
"first user line" = earliest stamp - fit() start and "all ranks up" = latest stamp - fit()
start. "total" is the whole fit() (staging, start, the empty script, shutdown, packing
outputs). Medians over --repeat runs; target: 2x2 first user line <= 3 s on CPU."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

STAMP = ('import os, time\nopen(os.environ["BENCH_STAMP"] + "." + str(os.getpid()), "w")'
         '.write(repr(time.time()))\n')

CONFIGS = [("torch_distributed", 1, 1), ("torch_distributed", 2, 2), ("mpi", 1, 1), ("mpi", 2, 2)]


def distribution(launcher: str, pph: int) -> dict:
    if launcher == "mpi":
        return {"mpi": {"enabled": True, "processes_per_host": pph}}
    return {"torch_distributed": {"enabled": True}, "mpi": {"processes_per_host": pph}}


def one_run(work: Path, launcher: str, hosts: int, pph: int, index: int) -> dict[str, float]:
    from smdist_launcher import PyTorch

    src = work / "src"
    src.mkdir(exist_ok=True)
    (src / "empty.py").write_text(STAMP)
    stamps = work / f"stamps-{launcher}-{hosts}x{pph}-{index}"
    stamps.mkdir()
    est = PyTorch(entry_point="empty.py", source_dir=str(src), instance_type="local", instance_count=hosts,
                  framework_version="2.3", py_version="py311", distribution=distribution(launcher, pph),
                  environment={"BENCH_STAMP": str(stamps / "t")})
    name = f"bench-{launcher.replace('_', '-')}-{hosts}x{pph}-{index}"
    start = time.time()
    est.fit(job_name=name, logs=False)
    total = time.time() - start
    times = [float(p.read_text()) for p in stamps.iterdir()]
    if len(times) != hosts * pph:
        raise RuntimeError(f"{name}: {len(times)} of {hosts * pph} ranks stamped")
    return {"first_user_line_s": min(times) - start, "all_ranks_up_s": max(times) - start, "total_s": total}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="smdist-bench-") as tmp:
        work = Path(tmp)
        os.environ["SMDIST_JOBS_DIR"] = str(work / "jobs")
        for launcher, hosts, pph in CONFIGS:
            runs = [one_run(work, launcher, hosts, pph, i) for i in range(args.repeat)]
            row = {"launcher": launcher, "hosts": hosts, "processes_per_host": pph, "runs": runs}
            for key in runs[0]:
                row[key] = statistics.median(r[key] for r in runs)
            results.append(row)
            print(f"{launcher:18s} {hosts}x{pph}  first user line {row['first_user_line_s']:5.2f} s  "
                  f"all ranks up {row['all_ranks_up_s']:5.2f} s  total {row['total_s']:5.2f} s", flush=True)
    print(f"(median of {args.repeat}; {os.cpu_count()} CPUs; python {sys.version.split()[0]})")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
