"""SDK speed: import time (ours and the official SageMaker SDK v2's), the first construction, and validate+plan time
for 1, 64 and 1,000 hosts × 8 processes.

    .venv/bin/python benchmarks/sdk.py [--repeat 15] [--importtime] [--no-official] [--cached-bytecode]

Import times are measured in fresh interpreters (time spent inside the import statement, median of --repeat runs).
`from smdist_launcher import PyTorch` and the official `from sagemaker.pytorch import PyTorch` run alternately in the
same loop, so that load from other work on the machine hits both alike; the ratio is ours / official of the medians.
--cached-bytecode: every interpreter reads and writes compiled bytecode under one private PYTHONPYCACHEPREFIX (warmed
up first), as after `pip install`; without it the environment decides (PYTHONDONTWRITEBYTECODE=1 in an editable
checkout means our modules are compiled from source in every run, the installed SDK's come from its __pycache__).
First construction: in a fresh interpreter, the import, then the first and the second ``PyTorch(**args)`` (1 host).
validate+plan = ``PyTorch(**args)`` (validation, resolution) + ``.plan()`` (the planner), in one process after warm-up;
the planner alone is also shown. Targets: ``import smdist_launcher`` ≤ 150 ms; ``from smdist_launcher import PyTorch``
≤ 1/20 of the official SDK's import; 1,000 × 8 plan ≤ 50 ms.
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
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
OURS = "from smdist_launcher import PyTorch"
OFFICIAL = "from sagemaker.pytorch import PyTorch"
HOST_COUNTS = (1, 64, 1000)
# environment of every measured interpreter (None: this process's); --cached-bytecode sets a private bytecode cache
_ENV: dict[str, str] | None = None


def _fresh_import_seconds(statement: str) -> float:
    code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=_ENV)
    return float(out.stdout.strip().splitlines()[-1])


def _use_cached_bytecode(cache_dir: str) -> None:
    """Point every measured interpreter at one bytecode cache and fill it (a wheel install compiles at install time)."""
    global _ENV
    _ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    _ENV["PYTHONPYCACHEPREFIX"] = cache_dir
    for statement in (*IMPORT_SNIPPETS.values(), OFFICIAL):
        subprocess.run([sys.executable, "-c", statement], capture_output=True, env=_ENV)


def _compare_with_official(repeat: int) -> tuple[list[float], list[float]]:
    """Fresh-interpreter import times of ours and the official SDK's PyTorch, alternating (one pair per round)."""
    ours, official = [], []
    for _ in range(repeat):
        ours.append(_fresh_import_seconds(OURS))
        official.append(_fresh_import_seconds(OFFICIAL))
    return ours, official


_FIRST_CONSTRUCTION = """
import json, sys, time
t0 = time.perf_counter()
from smdist_launcher import PyTorch
t1 = time.perf_counter()
PyTorch(**json.loads(sys.argv[1]))
t2 = time.perf_counter()
PyTorch(**json.loads(sys.argv[1]))
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def _first_construction_ms(args: dict[str, Any], repeat: int) -> tuple[float, float, float]:
    """Medians in a fresh interpreter: (import, first PyTorch(...), second PyTorch(...)), ms. The first construction
    pays for what the import leaves for later: pydantic, the schemas, the instance catalog."""
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", _FIRST_CONSTRUCTION, json.dumps(args)], capture_output=True,
                             text=True, check=True, env=_ENV)
        runs.append([float(x) for x in out.stdout.split()])
    return tuple(statistics.median(r[i] for r in runs) * 1e3 for i in range(3))  # type: ignore[return-value]


def _heavy_modules(statement: str) -> list[str]:
    heavy = ("torch", "boto3", "botocore", "sagemaker", "pydantic", "yaml", "rich")
    code = f"import sys; {statement}; print(' '.join(sorted(m for m in {heavy!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=_ENV)
    return out.stdout.split()


def _importtime_top(statement: str, top: int = 8) -> list[tuple[int, str]]:
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", statement], capture_output=True, text=True,
                         check=True, env=_ENV).stderr
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
    parser.add_argument("--importtime", action="store_true",
                        help="also list the slowest modules (python -X importtime)")
    parser.add_argument("--no-official", action="store_true", help="skip the official SageMaker SDK's import time")
    parser.add_argument("--cached-bytecode", action="store_true",
                        help="one warmed-up bytecode cache for all interpreters (PYTHONPYCACHEPREFIX), as installed")
    opts = parser.parse_args()

    clock = time.get_clock_info("perf_counter")
    print(f"python {sys.version.split()[0]}; timer: perf_counter, resolution {clock.resolution * 1e9:.0f} ns "
          f"({clock.implementation}); {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as cache_dir:
        if opts.cached_bytecode:
            _use_cached_bytecode(cache_dir)
        no_write = os.environ.get("PYTHONDONTWRITEBYTECODE", "")
        print("bytecode: " + ("one private cache for all, warmed up (PYTHONPYCACHEPREFIX)" if opts.cached_bytecode else
                              f"as the environment has it (PYTHONDONTWRITEBYTECODE={no_write!r})"))
        _print_imports(opts)
        _print_first_construction(opts.repeat)
    _print_validate_plan(opts.repeat)
    return 0


def _print_imports(opts: argparse.Namespace) -> None:
    print(f"\nimport time (fresh interpreter, median of {opts.repeat}):")
    for label, statement in IMPORT_SNIPPETS.items():
        samples = [_fresh_import_seconds(statement) for _ in range(opts.repeat)]
        heavy = _heavy_modules(statement)
        print(f"  {label:<40} median {statistics.median(samples) * 1e3:7.1f} ms   min {min(samples) * 1e3:7.1f} ms"
              f"   heavy modules loaded: {', '.join(heavy) or 'none'}")
        if opts.importtime:
            for micros, module in _importtime_top(statement):
                print(f"      {micros / 1e3:7.1f} ms cumulative  {module}")
    if opts.no_official:
        return
    if importlib.util.find_spec("sagemaker") is None:
        print("  (official SDK not installed: no comparison)")
        return
    ours, official = _compare_with_official(opts.repeat)
    ratio = statistics.median(ours) / statistics.median(official)
    print(f"\n  ours vs the official SDK v2, alternating in one loop (median of {opts.repeat} each, load average "
          f"{os.getloadavg()[0]:.2f} after):")
    print(f"  {OURS:<40} median {statistics.median(ours) * 1e3:7.1f} ms   min {min(ours) * 1e3:7.1f} ms")
    print(f"  {OFFICIAL:<40} median {statistics.median(official) * 1e3:7.1f} ms   min {min(official) * 1e3:7.1f} ms")
    verdict = "met" if ratio <= 0.05 else "NOT met"
    print(f"  ratio ours / official: {ratio:.4f} (1/{1 / ratio:.1f}); target ≤ 1/20: {verdict}")


def _print_first_construction(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as src:
        Path(src, "train.py").write_text("print('hi')\n")
        imported, first, second = _first_construction_ms(_estimator_args(src, 1), repeat)
    print(f"\nfirst construction, fresh interpreter (median of {repeat}): import {imported:.1f} ms, first PyTorch(...) "
          f"{first:.1f} ms, second {second:.2f} ms; import + first {imported + first:.1f} ms")


def _print_validate_plan(repeat: int) -> None:
    from smdist_launcher import PyTorch
    from smdist_launcher.plan.planner import build_plan

    print(f"\nvalidate + plan, torch_distributed on ml.p4d.24xlarge, 8 processes/host (median / min of {repeat}):")
    with tempfile.TemporaryDirectory() as src:
        Path(src, "train.py").write_text("print('hi')\n")
        for hosts in HOST_COUNTS:
            args = _estimator_args(src, hosts)
            total = _median_ms(functools.partial(_validate_and_plan, PyTorch, args), repeat)
            job = PyTorch(**args)
            plan = job.plan()
            resolved = _resolved(job)
            planner = _median_ms(functools.partial(build_plan, resolved), repeat) if resolved is not None else None
            line = (f"  {hosts:>5} hosts ({plan.world_size:>5} ranks): validate+plan {total[0]:8.2f} ms "
                    f"(min {total[1]:7.2f}, first call {total[2]:7.2f})")
            if planner:
                line += f"   planner alone {planner[0]:7.2f} ms (min {planner[1]:6.2f})"
            print(line)


def _validate_and_plan(estimator: Any, args: dict[str, Any]) -> Any:
    return estimator(**args).plan()


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
