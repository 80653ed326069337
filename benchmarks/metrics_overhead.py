"""What job metrics cost (docs/metrics.md): the same log-heavy 2x2 CPU job with and without metric_definitions and
system sampling, alternated, and the CPU time of the launcher and of every host process (with all they started).

    .venv/bin/python benchmarks/metrics_overhead.py [--lines 6000] [--work 300] [--pairs 2] [--out results.json]

Each rank does a little arithmetic per step and prints a line per step (one in ten carries `loss:` and `lr:`), so the
launcher reads about 4 x lines lines. Reports per run the launcher's CPU (this process: the log readers, the parser, the
sampler) and the hosts' CPU (waited-for children), and the extra CPU of the metered runs over the plain ones. Next to
that noisy difference (a shared machine), the parser's and the sampler's own cost measured in isolation on the same
lines and process trees gives a steadier figure."""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

TRAIN = r'''
import math, os
rank = int(os.environ["RANK"])
acc = 0.0
for i in range(int(os.environ["LINES"])):
    for k in range(int(os.environ["WORK"])):
        acc += math.sqrt(k + i + rank)
    if i % 10 == 0:
        print(f"step {i} loss: {1.0 / (i + 1):.6f} lr: 0.001", flush=True)
    else:
        print(f"step {i} rank {rank} data loader and framework chatter {acc:.3f}", flush=True)
'''
DEFINITIONS = [{"Name": "train:loss", "Regex": "loss: ([0-9.]+)"}, {"Name": "train:lr", "Regex": r"lr: (\S+)"}]


def _cpu() -> tuple[float, float]:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def run(tmp: Path, name: str, args: argparse.Namespace, metered: bool) -> dict:
    from smdist_launcher import PyTorch
    from smdist_launcher.metrics.store import read_points

    src = tmp / "src"
    src.mkdir(exist_ok=True)
    (src / "train.py").write_text(TRAIN)
    os.environ["SMDIST_METRICS_INTERVAL_S"] = "5" if metered else "0"  # the default interval, or no sampling
    est = PyTorch(entry_point="train.py", source_dir=str(src), instance_type="local", instance_count=2,
                  framework_version="2.3", py_version="py311", base_job_name=name,
                  environment={"LINES": str(args.lines), "WORK": str(args.work)},
                  distribution={"torch_distributed": {"enabled": True}, "mpi": {"processes_per_host": 2}},
                  metric_definitions=DEFINITIONS if metered else None)
    me0, kids0 = _cpu()
    started = time.time()
    job = est.fit(logs=False, jobs_root=str(tmp / "jobs"))
    wall = time.time() - started
    me1, kids1 = _cpu()
    points = read_points(job.job_dir)
    # the lines the hosts' logs kept that carry a metric: a point missing for a logged line is the recorder's loss
    logged = sum(text.count(" loss: ") for text in (f.read_text(errors="replace")
                                                    for f in (job.job_dir / "logs").glob("*.log")))
    return {"job": job.job_dir.name, "metered": metered, "wall_s": round(wall, 2), "metric_lines_logged": logged,
            "launcher_cpu_s": round(me1 - me0, 3), "hosts_cpu_s": round(kids1 - kids0, 3),
            "total_cpu_s": round(me1 - me0 + kids1 - kids0, 3),
            "training_points": sum(p.kind == "training" for p in points),
            "system_points": sum(p.kind == "system" for p in points)}


def isolated_costs(args: argparse.Namespace) -> dict:
    """The parser on the job's own lines, and one system sample of two process trees, timed alone."""
    import subprocess

    from smdist_launcher.metrics.definitions import MetricParser
    from smdist_launcher.metrics.system import SampledHost, SystemSampler

    lines = [f"step {i} loss: {1.0 / (i + 1):.6f} lr: 0.001" if i % 10 == 0 else
             f"step {i} rank 0 data loader and framework chatter {i * 1.5:.3f}" for i in range(args.lines)]
    parser = MetricParser(DEFINITIONS)
    t0 = time.process_time()
    for _ in range(4):  # the 4 ranks' lines
        for line in lines:
            parser.parse(line)
    parse_s = time.process_time() - t0
    trees = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) for _ in range(2)]
    try:
        sampler = SystemSampler([SampledHost(f"algo-{i + 1}", p.pid, disk_path="/") for i, p in enumerate(trees)],
                                lambda points: None)
        sampler.start()
        t0 = time.process_time()
        for _ in range(20):
            sampler.sample()
        sample_s = (time.process_time() - t0) / 20
        sampler.stop()
    finally:
        for p in trees:
            p.kill()
            p.wait()
    return {"parse_us_per_line": round(1e6 * parse_s / (4 * len(lines)), 2), "parse_cpu_s_per_job": round(parse_s, 4),
            "sample_ms_two_hosts": round(1e3 * sample_s, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=6000, help="lines per rank")
    ap.add_argument("--work", type=int, default=300, help="arithmetic per line (the job's own CPU)")
    ap.add_argument("--pairs", type=int, default=2, help="plain/metered pairs, alternated")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="smdist-metrics-bench-") as folder:
        tmp = Path(folder)
        runs = []
        for i in range(args.pairs):
            for metered in ((False, True) if i % 2 == 0 else (True, False)):  # ABBA: drift hits both alike
                runs.append(run(tmp, f"{'metered' if metered else 'plain'}-{i}", args, metered))
                print(json.dumps(runs[-1]), flush=True)
        isolated = isolated_costs(args)
    plain = [r["total_cpu_s"] for r in runs if not r["metered"]]
    metered = [r["total_cpu_s"] for r in runs if r["metered"]]
    base = statistics.median(plain)
    # the launcher is where parsing and sampling run: its CPU varies far less than the hosts' (torch imports)
    launcher_extra = (statistics.median(r["launcher_cpu_s"] for r in runs if r["metered"])
                      - statistics.median(r["launcher_cpu_s"] for r in runs if not r["metered"]))
    wall = statistics.median(r["wall_s"] for r in runs if r["metered"])
    samples_per_job = 2 * wall / 5.0  # hosts x samples at the default 5 s (the sampler samples every host at once)
    isolated_s = isolated["parse_cpu_s_per_job"] + samples_per_job / 2 * isolated["sample_ms_two_hosts"] / 1e3
    result = {
        "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "job": "2 hosts x 2 ranks (torchrun), CPU", "lines_per_rank": args.lines, "work_per_line": args.work,
        "metric_definitions": DEFINITIONS, "sample_interval_s": 5.0, "runs": runs,
        "median_total_cpu_s": {"plain": base, "metered": statistics.median(metered)},
        "extra_cpu_ratio_end_to_end": round(statistics.median(metered) / base - 1, 4),
        "extra_launcher_cpu_s": round(launcher_extra, 3),
        "extra_cpu_ratio_launcher": round(launcher_extra / base, 4),
        "isolated": isolated,
        "extra_cpu_ratio_isolated": round(isolated_s / base, 5),
    }
    text = json.dumps(result, indent=2) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
