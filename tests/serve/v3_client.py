"""A SageMaker SDK v3 client, run by the SDK v3 venv's python (tests/serve/sdk_v3_env.py) as its own process: the
unchanged `ModelTrainer` code a v3 user writes, pointed at `smdist serve` by the environment alone.

    python v3_client.py '{"bucket": ..., "source_dir": ..., "entry_script": ..., "distributed": "torchrun"|"smp"|
                          "mpi"|"none", "instance_count": 2, "process_count_per_node": 1, "action": "train"|"stop"}'

Prints `RESULT {json}` last: the job's name, status, failure reason, model artifacts. The training logs the SDK
streams go to stderr through logging at INFO (the SDK writes them to the `sagemaker.core.resources` logger)."""
from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

ROLE = "arn:aws:iam::123456789012:role/SageMakerRole"


def distributed(spec: dict[str, Any]) -> Any:
    from sagemaker.train.distributed import MPI, SMP, Torchrun

    count = spec.get("process_count_per_node")
    kind = spec.get("distributed", "none")
    if kind == "torchrun":
        return Torchrun(process_count_per_node=count)
    if kind == "smp":
        return Torchrun(process_count_per_node=count, smp=SMP(tensor_parallel_degree=1, hybrid_shard_degree=2))
    if kind == "mpi":
        return MPI(process_count_per_node=count, mpi_additional_options=spec.get("mpi_additional_options"))
    return None


def trainer(spec: dict[str, Any]) -> Any:
    import boto3
    from sagemaker.core.helper.session_helper import Session
    from sagemaker.train.configs import Compute, SourceCode, StoppingCondition
    from sagemaker.train.model_trainer import ModelTrainer

    session = Session(boto_session=boto3.Session(), default_bucket=spec["bucket"])
    return ModelTrainer(
        training_image=spec.get("image", "smdist-train:latest"), role=ROLE, sagemaker_session=session,
        base_job_name=spec.get("base_job_name", "v3"),
        source_code=SourceCode(source_dir=spec["source_dir"], entry_script=spec["entry_script"]),
        distributed=distributed(spec),
        compute=Compute(instance_type=spec.get("instance_type", "ml.m5.xlarge"),
                        instance_count=spec.get("instance_count", 1)),
        stopping_condition=StoppingCondition(max_runtime_in_seconds=600),
        hyperparameters=spec.get("hyperparameters") or {},
        environment=spec.get("environment") or {},
    )


def result(job: Any, error: str | None = None) -> dict[str, Any]:
    job.refresh()
    artifacts = getattr(job, "model_artifacts", None)
    return {"name": job.training_job_name, "status": job.training_job_status,
            "failure_reason": getattr(job, "failure_reason", None), "error": error,
            "model": getattr(artifacts, "s3_model_artifacts", None) if artifacts else None}


def main(spec: dict[str, Any]) -> dict[str, Any]:
    model_trainer = trainer(spec)
    if spec.get("action") == "stop":
        model_trainer.train(wait=False, logs=False)
        job = model_trainer._latest_training_job   # the SDK's own TrainingJob resource
        deadline = time.monotonic() + 120
        while job.training_job_status != "InProgress" or job.secondary_status != "Training":
            assert time.monotonic() < deadline, "the job never started training"
            time.sleep(0.5)
            job.refresh()
        job.stop()
        try:
            job.wait(logs=False)
        except Exception as exc:  # noqa: BLE001 - a stopped job may count as not successful: the status says
            return result(job, f"{type(exc).__name__}: {exc}")
        return result(job)
    try:
        model_trainer.train(wait=True, logs=True)
    except Exception as exc:  # a failed job raises; its reason is what the test looks at
        job = model_trainer._latest_training_job
        if job is None:
            raise
        return result(job, f"{type(exc).__name__}: {exc}")
    return result(model_trainer._latest_training_job)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s %(message)s")
    logging.getLogger("sagemaker.core.resources").setLevel(logging.INFO)   # the streamed training logs
    print("RESULT " + json.dumps(main(json.loads(sys.argv[1])), default=str), flush=True)
