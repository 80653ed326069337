"""ModelTrainer (SageMaker SDK v3's class) on our spec: v3-shaped jobs plan exactly like their v2 PyTorch equivalents,
are refused before anything runs, and run on the local backends."""
from __future__ import annotations

import json
import re
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from smdist_launcher import ModelTrainer, PyTorch
from smdist_launcher.errors import ValidationError
from smdist_launcher.train import configs, distributed
from smdist_launcher.train.model_trainer import Mode

IMAGE = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.5-gpu-py311"


# ---- stand-ins for v3's classes: the same class and attribute names, every field in model_dump() like pydantic ----
class _V3Config:
    FIELDS: tuple[str, ...] = ()
    DEFAULTS: dict[str, Any] = {}

    def __init__(self, **fields: Any) -> None:
        unknown = set(fields) - set(self.FIELDS)
        if unknown:
            raise TypeError(f"unexpected {unknown}")
        for name in self.FIELDS:
            setattr(self, name, fields.get(name, self.DEFAULTS.get(name)))

    def model_dump(self) -> dict[str, Any]:
        def dump(v: Any) -> Any:
            if isinstance(v, _V3Config):
                return v.model_dump()
            return [dump(x) for x in v] if isinstance(v, list) else v
        return {name: dump(getattr(self, name)) for name in self.FIELDS}


class SourceCode(_V3Config):
    FIELDS = ("source_dir", "entry_script", "command", "args", "requirements", "ignore_patterns")
    DEFAULTS = {"ignore_patterns": [".env", ".git", "__pycache__", ".DS_Store", ".cache", ".ipynb_checkpoints"]}


class Compute(_V3Config):
    FIELDS = ("instance_type", "instance_count", "volume_size_in_gb", "volume_kms_key_id",
              "keep_alive_period_in_seconds", "instance_groups", "training_plan_arn", "enable_managed_spot_training",
              "instance_preferences")
    DEFAULTS = {"volume_size_in_gb": 30}


class InstanceGroup(_V3Config):
    FIELDS = ("instance_type", "instance_count", "instance_group_name")


class SMP(_V3Config):
    FIELDS = ("hybrid_shard_degree", "sm_activation_offloading", "activation_loading_horizon",
              "fsdp_cache_flush_warnings", "allow_empty_shards", "tensor_parallel_degree", "context_parallel_degree",
              "expert_parallel_degree", "random_seed")


class Torchrun(_V3Config):
    FIELDS = ("process_count_per_node", "smp")


class MPI(_V3Config):
    FIELDS = ("process_count_per_node", "mpi_additional_options")


class InputData(_V3Config):
    FIELDS = ("channel_name", "data_source", "content_type")


class StoppingCondition(_V3Config):
    FIELDS = ("max_runtime_in_seconds", "max_wait_time_in_seconds", "max_pending_time_in_seconds")


class RetryStrategy(_V3Config):
    FIELDS = ("maximum_retry_attempts",)


@pytest.fixture()
def src(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "train.py").write_text("")
    return folder


def _v2(src: Path, **more: Any) -> PyTorch:
    """The v2 estimator that v3's defaults amount to."""
    args: dict[str, Any] = dict(image_uri=IMAGE, entry_point="train.py", source_dir=str(src),
                                base_job_name="pytorch-training-job", max_run=3600,
                                instance_type="ml.m5.xlarge", instance_count=1)
    args.update(more)
    return PyTorch(**args)


CASES = {
    "torchrun": (lambda: dict(distributed=Torchrun(process_count_per_node=8),
                              compute=Compute(instance_type="ml.p4d.24xlarge", instance_count=2)),
                 dict(instance_type="ml.p4d.24xlarge", instance_count=2,
                      distribution={"torch_distributed": {"enabled": True}, "mpi": {"processes_per_host": 8}})),
    "smp_v2": (lambda: dict(distributed=Torchrun(smp=SMP(hybrid_shard_degree=4, tensor_parallel_degree=4)),
                            compute=Compute(instance_type="ml.p4d.24xlarge", instance_count=2)),
               dict(instance_type="ml.p4d.24xlarge", instance_count=2,
                    distribution={"torch_distributed": {"enabled": True},
                                  "smdistributed": {"modelparallel": {"enabled": True, "parameters": {
                                      "hybrid_shard_degree": 4, "tensor_parallel_degree": 4}}}})),
    "mpi": (lambda: dict(distributed=MPI(process_count_per_node=4, mpi_additional_options=["-x", "NCCL_DEBUG=WARN"]),
                         compute=Compute(instance_type="ml.g5.12xlarge", instance_count=2),
                         stopping_condition=StoppingCondition(max_runtime_in_seconds=600)),
            dict(instance_type="ml.g5.12xlarge", instance_count=2, max_run=600,
                 distribution={"mpi": {"enabled": True, "processes_per_host": 4,
                                       "custom_mpi_options": "-x NCCL_DEBUG=WARN"}})),
    "heterogeneous": (lambda: dict(compute=Compute(instance_groups=[
                          InstanceGroup(instance_group_name="data", instance_type="ml.c5.2xlarge", instance_count=1),
                          InstanceGroup(instance_group_name="train", instance_type="ml.p4d.24xlarge",
                                        instance_count=2)])),
                      dict(instance_type=None, instance_count=None, instance_groups=[
                          {"instance_group_name": "data", "instance_type": "ml.c5.2xlarge", "instance_count": 1},
                          {"instance_group_name": "train", "instance_type": "ml.p4d.24xlarge", "instance_count": 2}])),
    "single": (lambda: {}, {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_v3_job_plans_exactly_like_its_v2_pytorch_equivalent(case: str, src: Path) -> None:
    """... with v3's hyperparameter encoding (tests/plan/test_v3_encoding.py)."""
    v3_args, v2_args = CASES[case]
    trainer = ModelTrainer(training_image=IMAGE, source_code=SourceCode(source_dir=str(src), entry_script="train.py"),
                           hyperparameters={"epochs": 2, "optimizer": "sgd"}, **v3_args())
    estimator = _v2(src, hyperparameters={"epochs": 2, "optimizer": "sgd"}, hyperparameter_encoding="v3", **v2_args)
    inputs = [InputData(channel_name="train", data_source="s3://bucket/train")]
    assert trainer.plan(inputs) == estimator.plan({"train": "s3://bucket/train"})


def test_our_classes_and_plain_mappings_plan_like_v3_objects(src: Path) -> None:
    def trainer(code: Any, dist: Any, compute: Any) -> ModelTrainer:
        return ModelTrainer(training_image=IMAGE, source_code=code, distributed=dist, compute=compute)

    v3 = trainer(SourceCode(source_dir=str(src), entry_script="train.py"),
                 Torchrun(process_count_per_node=2, smp=SMP(tensor_parallel_degree=2)),
                 Compute(instance_type="ml.p4d.24xlarge", instance_count=2))
    ours = trainer(configs.SourceCode(source_dir=str(src), entry_script="train.py"),
                   distributed.Torchrun(process_count_per_node=2, smp=distributed.SMP(tensor_parallel_degree=2)),
                   configs.Compute(instance_type="ml.p4d.24xlarge", instance_count=2))
    mappings = trainer({"source_dir": str(src), "entry_script": "train.py"},
                       {"process_count_per_node": 2, "smp": {"tensor_parallel_degree": 2}},
                       {"instance_type": "ml.p4d.24xlarge", "instance_count": 2})
    assert v3.plan() == ours.plan() == mappings.plan()
    assert v3.plan().strategy == "smp_v2" and v3.plan().world_size == 4


def test_bad_smp_degrees_are_refused_at_construction_with_v3_key_paths(src: Path) -> None:
    # at construction: there is no trainer to train(), so nothing can be uploaded (v3 would upload, then fail)
    with pytest.raises(ValidationError) as info:
        ModelTrainer(training_image=IMAGE, source_code=SourceCode(source_dir=str(src), entry_script="train.py"),
                     distributed=Torchrun(process_count_per_node=8, smp=SMP(tensor_parallel_degree=3,
                                                                           context_parallel_degree=0)),
                     compute=Compute(instance_type="ml.p4d.24xlarge", instance_count=2, training_plan_arn="arn:x"))
    paths = {e.path for e in info.value.errors}
    assert {"distributed.smp.context_parallel_degree", "compute.training_plan_arn"} <= paths
    assert str(info.value).count("\n") >= 2  # every problem, one line each
    # the degree rules need every degree readable: with context_parallel_degree fixed, tensor_parallel_degree is next
    with pytest.raises(ValidationError) as info:
        ModelTrainer(training_image=IMAGE, source_code=SourceCode(source_dir=str(src), entry_script="train.py"),
                     distributed=Torchrun(process_count_per_node=8, smp=SMP(tensor_parallel_degree=3)),
                     compute=Compute(instance_type="ml.p4d.24xlarge", instance_count=2))
    assert [e.path for e in info.value.errors] == ["distributed.smp.tensor_parallel_degree"]


def test_dry_run_returns_the_plan_and_starts_nothing(src: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SMDIST_JOBS_DIR", str(tmp_path / "jobs"))
    trainer = ModelTrainer(training_image=IMAGE, source_code=SourceCode(source_dir=str(src), entry_script="train.py"),
                           training_mode=Mode.SAGEMAKER_TRAINING_JOB)
    plan = trainer.train(input_data_config=[InputData(channel_name="train", data_source="s3://bucket/train")],
                         dry_run=True)
    assert plan.instance_type == "ml.m5.xlarge" and plan.max_run == 3600 and "train" in plan.channels
    assert not (tmp_path / "jobs").exists()


def test_local_data_for_sagemaker_is_named_by_its_input_data_config_path(src: Path) -> None:
    trainer = ModelTrainer(training_image=IMAGE, source_code=SourceCode(source_dir=str(src), entry_script="train.py"))
    with pytest.raises(ValidationError) as info:
        trainer.plan([InputData(channel_name="a", data_source="s3://bucket/a"),
                      InputData(channel_name="b", data_source="data/b")])
    assert [e.path for e in info.value.errors] == ["input_data_config[1].data_source"]


def test_builder_methods_validate_again(src: Path) -> None:
    trainer = ModelTrainer(training_image=IMAGE, source_code=SourceCode(source_dir=str(src), entry_script="train.py"),
                           base_job_name="mine")
    assert trainer.with_retry_strategy(RetryStrategy(maximum_retry_attempts=3)) is trainer
    trainer.with_checkpoint_config(configs.CheckpointConfig(s3_uri="s3://bucket/ckpt"))
    trainer.with_metric_definitions([configs.MetricDefinition(name="loss", regex="loss=(\\S+)")])
    spec = trainer.spec
    assert spec.max_retry_attempts == 3 and spec.checkpoint_s3_uri == "s3://bucket/ckpt"
    assert spec.metric_definitions is not None and spec.metric_definitions[0].Name == "loss"
    with pytest.raises(ValidationError) as info:
        trainer.with_retry_strategy({"maximum_retry_attempts": 99})
    assert [e.path for e in info.value.errors] == ["retry_strategy.maximum_retry_attempts"]
    assert trainer.spec.max_retry_attempts == 3  # a refused change changes nothing


def test_job_names_follow_v3(src: Path) -> None:
    from smdist_launcher.estimators.job_names import v3_name_from_base

    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(0))  # local time, as v3's datetime.now()
    assert v3_name_from_base("pytorch_training-job", now=0) == f"pytorch-training-job-{stamp}"
    assert v3_name_from_base("x" * 80, now=0) == "x" * 48 + f"-{stamp}"
    trainer = ModelTrainer(training_image="example.com/team/my-image@sha256:abc",
                           source_code=SourceCode(source_dir=str(src), entry_script="train.py"))
    assert trainer.base_job_name == "my-image-job"


# AWS's v3 contract values (sagemaker-train/tests/data/params_script), and the arguments v3's drivers pass for them
CONTRACT = {"integer": 1, "boolean": True, "float": 3.14, "string": "Hello World", "list": [1, 2, 3],
            "dict": {"string": "value", "integer": 3, "float": 3.14, "list": [1, 2, 3], "dict": {"key": "value"},
                     "boolean": True}}
CONTRACT_ARGS = ["--integer", "1", "--boolean", "true", "--float", "3.14", "--string", "Hello World", "--list",
                 "[1, 2, 3]", "--dict", '{"string": "value", "integer": 3, "float": 3.14, "list": [1, 2, 3], '
                                        '"dict": {"key": "value"}, "boolean": true}']


@pytest.mark.parametrize("entry, dist", [("train.py", None), ("train.sh", None), ("train.py", MPI()),
                                         ("train.py", Torchrun())])
def test_hyperparameters_reach_the_script_as_v3s_drivers_pass_them(src: Path, entry: str, dist: Any) -> None:
    """Not the v2 toolkit's `--boolean True --dict boolean=True,...` (sorted), which AWS's contract script refuses."""
    (src / "train.sh").write_text("")
    trainer = ModelTrainer(training_image=IMAGE, hyperparameters=CONTRACT, distributed=dist,
                           source_code=SourceCode(source_dir=str(src), entry_script=entry),
                           compute=Compute(instance_type="local", instance_count=1 if dist is None else 2))
    plan = trainer.plan()
    assert plan.hyperparameter_encoding == "v3"
    assert plan.hosts[0].argv[-len(CONTRACT_ARGS):] == CONTRACT_ARGS
    assert plan.hosts[0].env["SM_HP_BOOLEAN"] == "true" and json.loads(plan.hosts[0].env["SM_HPS"]) == CONTRACT
    assert plan.sagemaker_hyperparameters["string"] == "Hello World"  # v2: '"Hello World"'
    v2 = _v2(src, hyperparameters=CONTRACT, entry_point=entry).plan()
    assert v2.hosts[0].argv[-12:-10] == ["--boolean", "True"] and v2.sagemaker_hyperparameters["string"] == \
        '"Hello World"'


def test_smp_parameters_travel_in_v3s_order(src: Path) -> None:
    trainer = ModelTrainer(training_image=IMAGE, source_code=SourceCode(source_dir=str(src), entry_script="train.py"),
                           distributed=Torchrun(smp=SMP(tensor_parallel_degree=4, hybrid_shard_degree=2)),
                           compute=Compute(instance_type="ml.p4d.24xlarge", instance_count=2))
    sent = trainer.request(wire="v3", region="us-west-2")["HyperParameters"]["mp_parameters"]
    assert sent == '{"hybrid_shard_degree": 2, "tensor_parallel_degree": 4}'
    plan = trainer.plan()
    assert plan.sagemaker_hyperparameters["mp_parameters"] == sent and plan.hosts[0].argv[-1] == sent


@pytest.mark.parametrize("suffix, text", [("json", json.dumps(CONTRACT)),
                                          ("yaml", "integer: 1\nboolean: true\nfloat: 3.14\nstring: Hello World\n"
                                                   "list: [1, 2, 3]\ndict: {string: value, integer: 3, float: 3.14, "
                                                   "list: [1, 2, 3], dict: {key: value}, boolean: true}\n")])
def test_a_hyperparameters_file_becomes_the_attribute(src: Path, suffix: str, text: str) -> None:
    """v3 reads the file in model_post_init: `trainer.hyperparameters` is the mapping, not the path."""
    path = src / f"hyperparameters.{suffix}"
    path.write_text(text)
    trainer = ModelTrainer(training_image=IMAGE, hyperparameters=str(path),
                           source_code=SourceCode(source_dir=str(src), entry_script="train.py"))
    assert trainer.hyperparameters == CONTRACT == trainer.spec.hyperparameters


def test_base_job_names_with_underscores_name_jobs_as_v3(src: Path) -> None:
    """v3's local training example names its trainer "local_mode_multi_container": v3 keeps it and names the jobs with
    `-` (sagemaker.train.utils._get_unique_name); so does the default from an image repository with `_`."""
    code = SourceCode(source_dir=str(src), entry_script="train.py")
    trainer = ModelTrainer(training_image=IMAGE, source_code=code, base_job_name="local_mode_multi_container")
    assert trainer.base_job_name == "local_mode_multi_container"
    assert trainer.plan().job_name == "local-mode-multi-container"
    trainer = ModelTrainer(training_image="111122223333.dkr.ecr.us-west-2.amazonaws.com/my_team_image:1",
                           source_code=code)
    assert trainer.base_job_name == "my_team_image-job" and trainer.plan().job_name == "my-team-image-job"
    with pytest.raises(ValidationError) as info:  # SDK v2 sends the name as it is, which SageMaker refuses
        _v2(src, base_job_name="local_mode_multi_container")
    assert [e.path for e in info.value.errors] == ["base_job_name"]


def test_v3_attributes_are_the_arguments_as_given(src: Path) -> None:
    compute = Compute(instance_type="ml.p4d.24xlarge", instance_count=2)
    trainer = ModelTrainer(training_image=IMAGE, compute=compute, hyperparameters={"lr": 0.1},
                           source_code=SourceCode(source_dir=str(src), entry_script="train.py"))
    assert trainer.compute is compute and trainer.hyperparameters == {"lr": 0.1} and trainer.training_image == IMAGE
    assert trainer.distributed is None
    with pytest.raises(AttributeError):
        trainer.no_such_thing  # noqa: B018


@pytest.mark.slow
def test_train_runs_two_simulated_hosts_with_torchrun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text(
        "import json, os, sys\n"
        "path = os.path.join(os.environ['SM_MODEL_DIR'], 'rank' + os.environ['RANK'] + '.json')\n"
        "json.dump({'world': os.environ['WORLD_SIZE'], 'argv': sys.argv[1:]}, open(path, 'w'))\n")
    monkeypatch.chdir(tmp_path)
    trainer = ModelTrainer(training_image="smdist-train:latest",
                           source_code=configs.SourceCode(source_dir="src", entry_script="train.py"),
                           distributed=distributed.Torchrun(process_count_per_node=1),
                           compute=configs.Compute(instance_type="local", instance_count=2),
                           hyperparameters={"epochs": 1, "optimizer": "sgd"})
    job = trainer.train(logs=False, jobs_root=str(tmp_path / "jobs"))
    assert job.status == "Completed" and trainer.latest_training_job is job
    assert re.fullmatch(r"smdist-train-job-\d{14}", job.job_name)
    with tarfile.open(job.job_dir / "output" / "model.tar.gz") as archive:
        names = sorted(n for n in archive.getnames() if n.endswith(".json"))
        ranks = [json.load(archive.extractfile(n)) for n in names]  # type: ignore[arg-type]
    assert len(ranks) == 2 and all(r["world"] == "2" for r in ranks)
    assert ranks[0]["argv"] == ["--epochs", "1", "--optimizer", "sgd"]


_PARITY = '''
import json, sys
from sagemaker.train.configs import Compute, InputData, SourceCode, StoppingCondition
from sagemaker.train.distributed import MPI, SMP, Torchrun
from smdist_launcher import ModelTrainer

def cases(src):
    code = SourceCode(source_dir=src, entry_script="train.py")
    yield "smp", dict(source_code=code, compute=Compute(instance_type="ml.p4d.24xlarge", instance_count=2),
                      distributed=Torchrun(process_count_per_node=8, smp=SMP(hybrid_shard_degree=2,
                                                                             tensor_parallel_degree=4)),
                      stopping_condition=StoppingCondition(max_runtime_in_seconds=7200))
    yield "mpi", dict(source_code=code, compute=Compute(instance_type="ml.g5.12xlarge", instance_count=2),
                      distributed=MPI(process_count_per_node=4, mpi_additional_options=["-x", "A=1"]))
'''


def _parity_cases(src: str) -> dict[str, dict[str, Any]]:
    code = configs.SourceCode(source_dir=src, entry_script="train.py")
    return {
        "smp": dict(source_code=code, compute=configs.Compute(instance_type="ml.p4d.24xlarge", instance_count=2),
                    distributed=distributed.Torchrun(process_count_per_node=8, smp=distributed.SMP(
                        hybrid_shard_degree=2, tensor_parallel_degree=4)),
                    stopping_condition=configs.StoppingCondition(max_runtime_in_seconds=7200)),
        "mpi": dict(source_code=code, compute=configs.Compute(instance_type="ml.g5.12xlarge", instance_count=2),
                    distributed=distributed.MPI(process_count_per_node=4, mpi_additional_options=["-x", "A=1"])),
    }


def test_the_official_v3_objects_plan_like_ours(src: Path, sdk_v3_python: Path) -> None:
    """Real `sagemaker` 3.x objects, read by our ModelTrainer in the SDK v3 venv (the `sdk_v3_python` fixture)."""
    import os
    import subprocess
    script = _PARITY + '''
out = {}
for name, kwargs in cases(sys.argv[1]):
    trainer = ModelTrainer(training_image=sys.argv[2], **kwargs)
    out[name] = trainer.plan([InputData(channel_name="train", data_source="s3://bucket/train")]).to_dict()
print(json.dumps(out))
'''
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    done = subprocess.run([str(sdk_v3_python), "-c", script, str(src), IMAGE], capture_output=True, text=True,
                          env=env, timeout=300, cwd=src)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    for name, kwargs in _parity_cases(str(src)).items():
        plan = ModelTrainer(training_image=IMAGE, **kwargs).plan(
            [configs.InputData(channel_name="train", data_source="s3://bucket/train")])
        assert theirs[name] == json.loads(json.dumps(plan.to_dict())), name


def test_request_problems_are_named_at_v3_paths(src: Path) -> None:
    trainer = ModelTrainer(training_image=IMAGE, source_code=SourceCode(source_dir=str(src), entry_script="train.py"),
                           compute=Compute(instance_type="local", instance_count=2))
    for wire in ("smdist", "v3"):
        with pytest.raises(ValidationError) as info:
            trainer.request(wire=wire)
        assert [e.path for e in info.value.errors] == ["compute.instance_type"]
    with pytest.raises(ValidationError) as info:
        trainer.request(wire="v2")
    assert [e.path for e in info.value.errors] == ["wire"]
