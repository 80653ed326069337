"""build_plan by value, one strategy at a time (argv exactly as sagemaker-training-toolkit builds it)."""
from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from smdist_launcher.errors import ValidationError
from smdist_launcher.jobspec.resolved import ResolvedJob
from smdist_launcher.plan.model import REDACTED, LaunchPlan
from smdist_launcher.plan.planner import build_plan

PROGRAM = ["train.py", "--epochs", "2", "--lr", "0.1"]


def test_single_runs_python_on_every_host(make_job: Callable[..., ResolvedJob]) -> None:
    plan = build_plan(make_job(strategy="single"))
    assert plan.launcher == "python"
    assert plan.world_size == 2
    assert [(h.name, h.role, h.processes, h.ranks) for h in plan.hosts] == [
        ("algo-1", "node", 1, [0]), ("algo-2", "node", 1, [1])]
    assert plan.hosts[1].argv == ["python", *PROGRAM]
    assert plan.hosts[1].env == {"MASTER_ADDR": "algo-1", "MASTER_PORT": "7777"}


def test_torchrun_multi_node(make_job: Callable[..., ResolvedJob]) -> None:
    plan = build_plan(make_job())
    assert plan.launcher == "torchrun"
    assert plan.world_size == 16
    assert plan.master.model_dump() == {"host": "algo-1", "port": 7777}
    assert plan.host("algo-2").argv == ["torchrun", "--nnodes", "2", "--nproc_per_node", "8", "--master_addr", "algo-1",
                                        "--master_port", "7777", "--node_rank", "1", *PROGRAM]
    assert plan.host("algo-2").ranks == list(range(8, 16))
    assert plan.host("algo-1").env == {"MASTER_ADDR": "algo-1", "MASTER_PORT": "7777", "NCCL_SOCKET_IFNAME": "eth0",
                                       "NCCL_PROTO": "simple", "FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1",
                                       "RDMAV_FORK_SAFE": "1"}
    assert plan.sagemaker_hyperparameters["sagemaker_torch_distributed_enabled"] == "true"
    assert plan.sagemaker_hyperparameters["sagemaker_instance_type"] == '"ml.p4d.24xlarge"'


def test_torchrun_single_node_has_no_master_flags_and_no_efa_env_off_efa(make_job: Callable[..., ResolvedJob]) -> None:
    plan = build_plan(make_job(instance="p3", instance_count=1))
    assert plan.hosts[0].argv == ["torchrun", "--nnodes", "1", "--nproc_per_node", "8", *PROGRAM]
    assert "FI_PROVIDER" not in plan.hosts[0].env


def test_torchrun_neuron_parallel_compile_prefix(make_job: Callable[..., ResolvedJob]) -> None:
    plan = build_plan(make_job(environment={"RUN_NEURON_PARALLEL_COMPILE": "1"}))
    assert plan.hosts[0].argv[:2] == ["neuron_parallel_compile", "torchrun"]


def test_torchrun_refuses_non_python_entry_point(make_job: Callable[..., ResolvedJob]) -> None:
    with pytest.raises(ValidationError) as info:
        build_plan(make_job(entry_point="train.sh"))
    assert [e.path for e in info.value.errors] == ["entry_point"]


def test_smp_v2_puts_parameters_in_env_and_hyperparameters(make_job: Callable[..., ResolvedJob]) -> None:
    params = {"tensor_parallel_degree": 4, "hybrid_shard_degree": 4}
    plan = build_plan(make_job(strategy="smp_v2", mp_parameters=params))
    assert plan.launcher == "torchrun"
    assert json.loads(plan.hosts[0].env["SM_HP_MP_PARAMETERS"]) == params
    assert plan.hyperparameters["mp_parameters"] == params
    assert plan.hosts[0].argv[-2:] == ["--mp_parameters", "hybrid_shard_degree=4,tensor_parallel_degree=4"]
    hps = plan.sagemaker_hyperparameters
    assert hps["sagemaker_torch_distributed_enabled"] == "true"
    assert hps["sagemaker_distributed_dataparallel_enabled"] == "false"


MPI_COMMON = ["-mca", "pml", "ob1", "-mca", "btl", "^openib", "-mca", "orte_abort_on_non_zero_status", "1",
              "-mca", "btl_vader_single_copy_mechanism", "none"]


def _net(iface: str) -> list[str]:
    return ["-mca", "btl_tcp_if_include", iface, "-mca", "oob_tcp_if_include", iface,
            "-mca", "plm_rsh_no_tree_spawn", "1"]


def test_mpi_master_argv_and_worker_roles(make_job: Callable[..., ResolvedJob]) -> None:
    job = make_job(strategy="mpi", instance="p3", environment={"HF_TOKEN": "s3cr3t", "A": "1"},
                       custom_mpi_options="--NCCL_DEBUG WARN -x FOO='a b' --mca x y")
    plan = build_plan(job)
    assert plan.launcher == "mpirun"
    assert [(h.role, h.ranks[0], h.processes) for h in plan.hosts] == [("mpi_master", 0, 8), ("mpi_worker", 8, 8)]
    assert plan.host("algo-2").argv == []
    assert plan.host("algo-1").argv == [
        "mpirun", "--host", "algo-1:8,algo-2:8", "-np", "16", "--allow-run-as-root", "--display-map", "--tag-output",
        *_net("eth0"), "-bind-to", "none", "-map-by", "slot", *MPI_COMMON,
        "-x", "NCCL_MIN_NRINGS=4", "-x", "NCCL_SOCKET_IFNAME=eth0", "-x", "NCCL_DEBUG=WARN",
        "-x", "LD_LIBRARY_PATH", "-x", "PATH",
        "-x", "FOO=a b", "--mca", "x", "y",
        "-x", "A", "-x", "HF_TOKEN", "-x", "MASTER_ADDR", "-x", "MASTER_PORT", "-x", "PYTHONPATH",
        "python", "-m", "mpi4py", *PROGRAM,
    ]
    hps = plan.sagemaker_hyperparameters
    assert hps["sagemaker_mpi_enabled"] == "true"
    assert hps["sagemaker_mpi_num_of_processes_per_host"] == "8"


def test_mpi_one_process_per_host_lists_hosts_without_slots(make_job: Callable[..., ResolvedJob]) -> None:
    argv = build_plan(make_job(strategy="mpi", instance="local", processes_per_host=1, instance_count=3)).hosts[0].argv
    assert argv[1:5] == ["--host", "algo-1,algo-2,algo-3", "-np", "3"]
    assert argv[argv.index("btl_tcp_if_include") + 1] == "lo"


def test_smp_v1_adds_nccl_settings_and_mp_parameters(make_job: Callable[..., ResolvedJob]) -> None:
    plan = build_plan(make_job(strategy="smp_v1", instance="p3", instance_count=1, framework_version="1.13.1",
                                   mp_parameters={"tensor_parallel_degree": 4, "ddp": True}))
    argv = plan.hosts[0].argv
    tail = argv[argv.index("PYTHONPATH") + 1:]
    assert tail == ["-x", "NCCL_PROTO=simple", "python", "-m", "mpi4py", *PROGRAM,
                    "--mp_parameters", "ddp=True,tensor_parallel_degree=4"]
    assert build_plan(make_job(strategy="smp_v1", mp_parameters={"a": 1})).hosts[0].argv.count("NCCL_ALGO=ring") == 1


def test_smddp_multi_node(make_job: Callable[..., ResolvedJob]) -> None:
    plan = build_plan(make_job(strategy="smddp"))
    assert plan.hosts[0].argv == [
        "mpirun", "--host", "algo-1:8,algo-2:8", "-np", "16", "--allow-run-as-root", "--tag-output", "--oversubscribe",
        *_net("eth0"), *MPI_COMMON, "-mca", "plm_rsh_num_concurrent", "2",
        "-x", "NCCL_SOCKET_IFNAME=eth0", "-x", "NCCL_DEBUG=INFO", "-x", "LD_LIBRARY_PATH", "-x", "PATH",
        "-x", "SMDATAPARALLEL_USE_HOMOGENEOUS=1", "-x", "FI_PROVIDER=efa", "-x", "RDMAV_FORK_SAFE=1",
        "-x", "NCCL_PROTO=simple", "-x", "FI_EFA_USE_DEVICE_RDMA=1",
        "-x", "SMDATAPARALLEL_SERVER_ADDR=algo-1", "-x", "SMDATAPARALLEL_SERVER_PORT=7592",
        "-x", "SAGEMAKER_INSTANCE_TYPE=ml.p4d.24xlarge",
        "smddprun", "python", "-m", "mpi4py", *PROGRAM,
    ]
    hps = plan.sagemaker_hyperparameters
    assert hps["sagemaker_distributed_dataparallel_enabled"] == "true"
    assert hps["sagemaker_distributed_dataparallel_custom_mpi_options"] == '""'


def test_smddp_single_node_and_pytorchddp_flag(make_job: Callable[..., ResolvedJob]) -> None:
    plan = build_plan(make_job(strategy="pytorchddp", instance_count=1))
    argv = plan.hosts[0].argv
    assert argv[1:3] == ["--host", "algo-1"]
    assert "SMDATAPARALLEL_USE_SINGLENODE=1" in argv and "SMDATAPARALLEL_SERVER_ADDR=algo-1" not in argv
    assert plan.sagemaker_hyperparameters["sagemaker_pytorch_ddp_enabled"] == "true"


SHELL_PROGRAM = ["/bin/sh", "-c", 'exec "$0" "$@"', "./run.sh", "--epochs", "2", "--lr", "0.1"]


@pytest.mark.parametrize("strategy", ["mpi", "smp_v1", "smddp", "pytorchddp"])
def test_mpirun_runs_a_shell_entry_point_as_its_program(make_job: Callable[..., ResolvedJob], strategy: str) -> None:
    """The toolkit's MPI runners: `mpirun ... /bin/sh -c "./run.sh <quoted args>"`; here the command string is a
    constant and the entry point and its arguments stay separate tokens."""
    python = build_plan(make_job(strategy=strategy)).hosts[0].argv
    shell = build_plan(make_job(strategy=strategy, entry_point="run.sh")).hosts[0].argv
    start = python.index("python")
    assert python[start:start + 8] == ["python", "-m", "mpi4py", *PROGRAM]
    assert shell[:start] == python[:start]   # the same mpirun (and smddprun) in front
    assert shell[start:] == SHELL_PROGRAM + python[start + 8:]   # SMP v1: its --mp_parameters follow as well
    sub = build_plan(make_job(strategy=strategy, entry_point="sub/run.sh")).hosts[0].argv
    assert sub[start:start + 4] == ["/bin/sh", "-c", 'exec "$0" "$@"', "./sub/run.sh"]


def test_other_entry_points_on_a_host_of_their_own_are_unchanged(make_job: Callable[..., ResolvedJob]) -> None:
    assert build_plan(make_job(strategy="single", entry_point="run.sh")).hosts[0].argv == [
        "/bin/sh", "run.sh", "--epochs", "2", "--lr", "0.1"]
    assert build_plan(make_job(strategy="single", entry_point="train")).hosts[0].argv == [
        "./train", "--epochs", "2", "--lr", "0.1"]


def test_a_shell_entry_point_named_like_an_option_is_not_read_as_one(make_job: Callable[..., ResolvedJob],
                                                                    tmp_path: Path) -> None:
    """`/bin/sh -x.sh` fails with "Illegal option -." (the toolkit runs `./-x.sh`): the name goes as a path."""
    argv = build_plan(make_job(strategy="single", entry_point="-x.sh")).hosts[0].argv
    assert argv == ["/bin/sh", "./-x.sh", "--epochs", "2", "--lr", "0.1"]
    (tmp_path / "-x.sh").write_text('printf "%s|" "$@"\n')
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "--epochs|2|--lr|0.1|"), done.stderr


def test_local_runs_name_no_efa_provider(make_job: Callable[..., ResolvedJob]) -> None:
    for strategy in ("pytorchddp", "smddp", "torch_distributed", "mpi"):
        plan = build_plan(make_job(strategy=strategy, instance="local", processes_per_host=2))
        assert "FI_PROVIDER=efa" not in plan.hosts[0].argv and "FI_PROVIDER" not in plan.hosts[0].env, strategy


def test_bad_custom_mpi_options_name_their_key(make_job: Callable[..., ResolvedJob]) -> None:
    for strategy, key in [("mpi", "distribution.mpi.custom_mpi_options"),
                          ("smddp", "distribution.smdistributed.dataparallel.custom_mpi_options")]:
        for options in ["-x 'unclosed", "--NCCL_DEBUG"]:
            with pytest.raises(ValidationError) as info:
                build_plan(make_job(strategy=strategy, custom_mpi_options=options))
            assert [e.path for e in info.value.errors] == [key]


def test_parameter_server_layout(make_job: Callable[..., ResolvedJob]) -> None:
    plan = build_plan(make_job(framework="tensorflow", strategy="parameter_server", instance="p3",
                               processes_per_host=1))
    assert plan.launcher == "parameter_server"
    assert [h.role for h in plan.hosts] == ["ps", "ps"]
    assert plan.world_size == 2
    assert json.loads(plan.hosts[1].env["TF_CONFIG"]) == {
        "cluster": {"master": ["algo-1:2222"], "ps": ["algo-1:2223", "algo-2:2223"], "worker": ["algo-2:2222"]},
        "environment": "cloud", "task": {"index": 0, "type": "worker"}}
    assert json.loads(plan.hosts[1].env["SMDIST_PS_TF_CONFIG"])["task"] == {"index": 1, "type": "ps"}
    assert "MASTER_ADDR" not in plan.hosts[0].env
    assert plan.hosts[0].argv == ["python", *PROGRAM, "--model_dir", "/opt/ml/model"]
    single = build_plan(make_job(framework="tensorflow", strategy="parameter_server", instance_count=1,
                                 processes_per_host=1))
    assert single.hosts[0].role == "node" and "TF_CONFIG" not in single.hosts[0].env


def test_multi_worker_mirrored(make_job: Callable[..., ResolvedJob]) -> None:
    plan = build_plan(make_job(framework="tensorflow", strategy="multi_worker_mirrored_strategy", processes_per_host=1,
                                   hyperparameters={}, output_path="s3://b/out/"))
    assert json.loads(plan.hosts[1].env["TF_CONFIG"])["task"] == {"index": 1, "type": "worker"}
    assert plan.hyperparameters == {"model_dir": "s3://b/out/job/model"}


@pytest.mark.parametrize(("model_dir", "expected"), [
    (None, {"model_dir": "s3://b/out/job/model"}),     # the SDK default
    ("s3://b/models", {"model_dir": "s3://b/models"}),
    ("/opt/ml/model", {"model_dir": "/opt/ml/model"}),
    (False, {}),                                        # model_dir=False: no model_dir hyperparameter
])
def test_tensorflow_model_dir_argument(make_job: Callable[..., ResolvedJob], model_dir: str | bool | None,
                                       expected: dict[str, str]) -> None:
    plan = build_plan(make_job(framework="tensorflow", strategy="multi_worker_mirrored_strategy", processes_per_host=1,
                               hyperparameters={}, output_path="s3://b/out/", model_dir=model_dir))
    assert plan.hyperparameters == expected
    assert ("model_dir" in plan.sagemaker_hyperparameters) == bool(expected)
    assert plan.hosts[0].argv == ["python", "train.py", *(["--model_dir", expected["model_dir"]] if expected else [])]


def test_sagemaker_hyperparameters_script_mode_keys(make_job: Callable[..., ResolvedJob]) -> None:
    plan = build_plan(make_job(region="us-west-2", hyperparameters={"name": "x"}))
    hps = plan.sagemaker_hyperparameters
    assert hps["name"] == '"x"'
    assert hps["sagemaker_program"] == '"train.py"'
    assert hps["sagemaker_submit_directory"] == '"src"'
    assert hps["sagemaker_container_log_level"] == "20"
    assert hps["sagemaker_job_name"] == '"job"'
    assert hps["sagemaker_region"] == '"us-west-2"'
    assert "sagemaker_mpi_num_of_processes_per_host" not in hps  # 8 = the instance's GPUs


def test_generated_keys_never_overwrite_user_hyperparameters(make_job: Callable[..., ResolvedJob]) -> None:
    with pytest.raises(ValidationError) as info:
        build_plan(make_job(strategy="smp_v2", mp_parameters={"a": 1},
                            hyperparameters={"mp_parameters": 1, "sagemaker_program": "x"}))
    assert [e.path for e in info.value.errors] == ["hyperparameters.mp_parameters", "hyperparameters.sagemaker_program"]


def test_secrets_stay_out_of_argv_and_rendered_plans(make_job: Callable[..., ResolvedJob]) -> None:
    job = make_job(strategy="mpi", environment={"WANDB_API_KEY": "k-123", "DB_PASSWORD": "pw-456"})
    plan = build_plan(job)
    assert not any("k-123" in tok or "pw-456" in tok for h in plan.hosts for tok in h.argv)
    for text in (plan.to_json(), plan.to_yaml()):
        assert "k-123" not in text and "pw-456" not in text
    assert plan.to_dict()["environment"]["WANDB_API_KEY"] == REDACTED


def test_channels_and_round_trip(make_job: Callable[..., ResolvedJob]) -> None:
    from smdist_launcher.plan.model import Channel

    plan = build_plan(make_job(), {"train": Channel(uri="s3://b/train")})
    assert plan.channels["train"].uri == "s3://b/train"
    assert LaunchPlan.from_json(plan.to_json()) == plan


def test_deterministic_and_fast_at_scale(make_job: Callable[..., ResolvedJob]) -> None:
    job = make_job(instance_count=1000)
    first = build_plan(job)
    assert first.to_json() == build_plan(job).to_json()
    assert first.hosts[-1].name == "algo-1000" and first.hosts[-1].ranks[-1] == 7999 and first.world_size == 8000


# ---- heterogeneous clusters ------------------------------------------------------------------------------------------
def _hetero(make_job: Callable[..., ResolvedJob], strategy: str, **overrides: object) -> LaunchPlan:
    from smdist_launcher.jobspec.resolved import ResolvedInstanceGroup

    groups = [ResolvedInstanceGroup(name="data", instance_type="ml.c5.18xlarge", instance_count=1),
              ResolvedInstanceGroup(name="train", instance_type="ml.p4d.24xlarge", instance_count=2,
                                    distribution=strategy != "single")]
    return build_plan(make_job(strategy=strategy, instance_groups=groups, **overrides))


@pytest.mark.parametrize("strategy", ["torch_distributed", "mpi"])
def test_heterogeneous_ranks_run_on_the_distribution_group(make_job: Callable[..., ResolvedJob], strategy: str) -> None:
    plan = _hetero(make_job, strategy)
    assert plan.master.host == "algo-2"   # the first host of the distribution group, as the toolkit picks it
    assert plan.instance_count == 3 and plan.world_size == 16 and plan.instance_type == "ml.p4d.24xlarge"
    assert [(g.name, g.hosts, g.distribution) for g in plan.instance_groups or []] == [
        ("data", ["algo-1"], False), ("train", ["algo-2", "algo-3"], True)]
    assert plan.instance_types == ["ml.c5.18xlarge", "ml.p4d.24xlarge"]
    data = plan.host("algo-1")
    assert (data.role, data.processes, data.ranks, data.argv) == ("node", 1, [], ["python", *PROGRAM])
    assert data.env == {"MASTER_ADDR": "algo-2", "MASTER_PORT": "7777"}
    assert plan.host("algo-3").ranks == list(range(8, 16))
    if strategy == "torch_distributed":
        assert plan.host("algo-3").argv[:11] == ["torchrun", "--nnodes", "2", "--nproc_per_node", "8", "--master_addr",
                                                 "algo-2", "--master_port", "7777", "--node_rank", "1"]
    else:
        assert [h.role for h in plan.hosts] == ["node", "mpi_master", "mpi_worker"]
        argv = plan.host("algo-2").argv
        assert argv[argv.index("--host") + 1] == "algo-2:8,algo-3:8" and argv[argv.index("-np") + 1] == "16"
    assert plan.sagemaker_hyperparameters["sagemaker_distribution_instance_groups"] == '["train"]'
    rendered = plan.to_dict()
    assert [g["name"] for g in rendered["instance_groups"]] == ["data", "train"]
    assert LaunchPlan.from_json(plan.to_json()) == plan


def test_heterogeneous_without_distribution_runs_the_script_on_every_host(make_job: Callable[..., ResolvedJob]) -> None:
    plan = _hetero(make_job, "single", processes_per_host=1)
    assert plan.master.host == "algo-1" and plan.world_size == 3
    assert [(h.name, h.ranks, h.argv) for h in plan.hosts] == [
        (f"algo-{i + 1}", [i], ["python", *PROGRAM]) for i in range(3)]
    assert "sagemaker_distribution_instance_groups" not in plan.sagemaker_hyperparameters


def test_homogeneous_plan_renders_no_instance_groups(make_job: Callable[..., ResolvedJob]) -> None:
    # pinned plans of jobs without instance_groups stay byte-identical
    assert "instance_groups" not in build_plan(make_job()).to_dict()
