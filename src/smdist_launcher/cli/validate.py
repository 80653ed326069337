"""``smdist validate job.yaml``: exit 0 when the job file is valid, else 2 with one line per problem."""
from __future__ import annotations

import argparse

from .console import show
from .job_loading import EXIT_OK, load_or_report


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser("validate", help="check a job file (exit 2 with one line per problem)",
                              description="Check a job file without touching anything: exit 0 when valid, "
                                          "2 with one line per problem.")
    p.add_argument("job_file", help="YAML job file (estimator arguments + framework)")
    return p


def run(args: argparse.Namespace) -> int:
    loaded = load_or_report(args.job_file, check_inputs=True)  # a missing data folder fails here, not at run
    if isinstance(loaded, int):
        return loaded
    job = loaded.job
    world = job.instance_count * job.processes_per_host
    cluster = f"{job.instance_count} × {job.instance_type}"
    if len(job.instance_groups) > 1:
        # the distribution group is marked; the other groups run the script once per host
        cluster = ", ".join(f"{g.name}: {g.instance_count} × {g.instance_type}"
                            + (" (distribution)" if g.distribution else "")
                            for g in job.instance_groups)
    show(f"{args.job_file}: ok: {job.framework} {job.strategy}, {cluster}, "
         f"{job.processes_per_host} process(es) per host (world size {world})")
    return EXIT_OK
