"""Invariants of build_plan over random jobs: ranks tile the world, argv is all strings, env values never reach argv."""
from __future__ import annotations

from typing import Any, get_args

from hypothesis import given, settings, strategies as st

from smdist_launcher.errors import ValidationError
from smdist_launcher.jobspec.resolved import InstanceInfo, ResolvedJob, Strategy
from smdist_launcher.plan.planner import build_plan

INSTANCES = [
    InstanceInfo(instance_type="ml.p4d.24xlarge", gpus=8, efa=True, efa_rdma=True),
    InstanceInfo(instance_type="ml.g5.2xlarge", gpus=1),
    InstanceInfo(instance_type="ml.trn1.32xlarge", neuron_cores=32, efa=True, efa_rdma=True),
    InstanceInfo(instance_type="local", local=True),
]
SECRET = "S3CRET-VALUE"
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6)


@st.composite
def jobs(draw: Any) -> ResolvedJob:
    instance = draw(st.sampled_from(INSTANCES))
    strategy = draw(st.sampled_from(get_args(Strategy)))
    return ResolvedJob(
        framework=draw(st.sampled_from(["pytorch", "tensorflow", "huggingface"])),
        framework_version=draw(st.sampled_from([None, "1.13.1", "2.3"])),
        job_name="job", entry_point=draw(st.sampled_from(["train.py", "sub/train.py", "run.sh"])),
        source_dir=draw(st.sampled_from([None, "src"])),
        instance_type=instance.instance_type, instance=instance, instance_count=draw(st.integers(1, 12)),
        processes_per_host=draw(st.integers(1, 8)), strategy=strategy,
        custom_mpi_options=draw(st.sampled_from(["", "--NCCL_DEBUG WARN", "-x A=1 --mca a b", "'unclosed"])),
        mp_parameters=draw(st.none() | st.dictionaries(st.sampled_from(["tensor_parallel_degree", "ddp"]), json_values,
                                                       max_size=2)),
        hyperparameters=draw(st.dictionaries(st.text(min_size=1, max_size=6), json_values, max_size=4)),
        environment={**draw(st.dictionaries(st.from_regex(r"[A-Z]{1,6}", fullmatch=True), st.just("plain"),
                                            max_size=2)),
                     "API_TOKEN": SECRET},
        network_interface="lo" if instance.local else "eth0",
    )


@settings(max_examples=300, deadline=None)
@given(jobs())
def test_plan_invariants(job: ResolvedJob) -> None:
    try:
        plan = build_plan(job)
    except ValidationError as exc:  # the only failure the planner may raise, always with a key path
        assert exc.errors and all(e.path for e in exc.errors)
        return
    ranks = [r for h in plan.hosts for r in h.ranks]
    assert ranks == list(range(plan.world_size))
    assert all(len(h.ranks) == h.processes for h in plan.hosts)
    assert [h.name for h in plan.hosts] == [f"algo-{i}" for i in range(1, job.instance_count + 1)]
    assert plan.master.host == "algo-1"
    for host in plan.hosts:
        assert all(isinstance(tok, str) for tok in host.argv)
        assert not any(SECRET in tok for tok in host.argv)
        assert (host.argv == []) == (host.role == "mpi_worker")
    assert SECRET not in plan.to_json()
