"""SDK speed: import time and validate+plan time for 1, 64 and 1,000 hosts × 8 processes.

    .venv/bin/python benchmarks/sdk.py [--repeat 15] [--importtime]

Import times are measured in fresh interpreters (time spent inside the import statement, median of --repeat runs).
validate+plan = ``PyTorch(**args)`` (validation, resolution) + ``.plan()`` (the planner), in one process after warm-up;
the planner alone is also shown. Targets: ``import smdist_launcher`` ≤ 150 ms; 1,000 × 8 plan ≤ 50 ms.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

IMPORT_SNIPPETS = {
    "import smdist_launcher": "import smdist_launcher",
    "from smdist_launcher import PyTorch": "from smdist_launcher import PyTorch",
}
HOST_COUNTS = (1, 64, 1000)


def _fresh_import_seconds(statement: str) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def _heavy_modules(statement: str) -> list[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(m for m in ('torch', 'boto3', 'botocore', 'sagemaker', 'pydantic', 'yaml', 'rich') if m in sys.modules)))"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def _importtime_top(statement: str, top: int = 8) -> list[tuple[int, str]]:
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", statement], capture_output=True, text=True, check=True).stderr
    rows = []
    for line in err.splitlines()[1:]:
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    return sorted(rows, reverse=True)[:top]


def _median_ms(fn: Callable[[], Any], repeat: int) -> tuple[float, float, float]:
    """(median, min, first call); the first call pays for lazy imports, the catalog load and pydantic schema builds."""
    t = time.perf_counter()
    fn()
    first = time.perf_counter() - t
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples) * 1e3, min(samples) * 1e3, first * 1e3


def _estimator_args(source_dir: str, hosts: int) -> dict[str, Any]:
    return dict(entry_point="train.py", source_dir=source_dir, role="arn:aws:iam::111122223333:role/Train",
                instance_type="ml.p4d.24xlarge", instance_count=hosts, framework_version="2.3", py_version="py311",
                hyperparameters={"epochs": 2, "lr": 0.1}, distribution={"torch_distributed": {"enabled": True}})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--importtime", action="store_true", help="also list the slowest modules (python -X importtime)")
    opts = parser.parse_args()

    clock = time.get_clock_info("perf_counter")
    print(f"python {sys.version.split()[0]}; timer: perf_counter, resolution {clock.resolution * 1e9:.0f} ns ({clock.implementation})")
    print(f"\nimport time (fresh interpreter, median of {opts.repeat}):")
    for label, statement in IMPORT_SNIPPETS.items():
        samples = [_fresh_import_seconds(statement) for _ in range(opts.repeat)]
        heavy = _heavy_modules(statement)
        print(f"  {label:<40} median {statistics.median(samples) * 1e3:7.1f} ms   min {min(samples) * 1e3:7.1f} ms"
              f"   heavy modules loaded: {', '.join(heavy) or 'none'}")
        if opts.importtime:
            for micros, module in _importtime_top(statement):
                print(f"      {micros / 1e3:7.1f} ms cumulative  {module}")

    from smdist_launcher import PyTorch
    from smdist_launcher.plan.planner import build_plan

    print(f"\nvalidate + plan, torch_distributed on ml.p4d.24xlarge, 8 processes/host (median / min of {opts.repeat}):")
    with tempfile.TemporaryDirectory() as src:
        Path(src, "train.py").write_text("print('hi')\n")
        for hosts in HOST_COUNTS:
            args = _estimator_args(src, hosts)
            total = _median_ms(lambda: PyTorch(**args).plan(), opts.repeat)
            job = PyTorch(**args)
            plan = job.plan()
            resolved = _resolved(job)
            planner = _median_ms(lambda: build_plan(resolved), opts.repeat) if resolved is not None else None
            line = (f"  {hosts:>5} hosts ({plan.world_size:>5} ranks): validate+plan {total[0]:8.2f} ms (min {total[1]:7.2f},"
                    f" first call {total[2]:7.2f})")
            if planner:
                line += f"   planner alone {planner[0]:7.2f} ms (min {planner[1]:6.2f})"
            print(line)
    return 0


def _resolved(estimator: Any) -> Any:
    """The estimator's ResolvedJob if it exposes one (to time the planner alone)."""
    for name in ("resolved", "resolved_job", "_resolved"):
        value = getattr(estimator, name, None)
        value = value() if callable(value) else value
        if value is not None:
            return value
    return None


if __name__ == "__main__":
    sys.exit(main())
