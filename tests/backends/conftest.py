import pytest

from .moto_s3 import moto_endpoint, s3  # noqa: F401 - fixtures
from .resilience_job import model_weights, resilience_estimator

ACCEPTANCE_STEPS = {"STEPS": "32"}  # 0.3 s a step: a kill at 5 s falls mid-run on a busy machine too


@pytest.fixture(scope="session")
def acceptance_clean_weights(tmp_path_factory: pytest.TempPathFactory) -> list[float]:
    """The uninterrupted run the netns and Slurm acceptance jobs must match, run once (process backend)."""
    tmp = tmp_path_factory.mktemp("acceptance-clean")
    job = resilience_estimator(tmp, "clean", environment={**ACCEPTANCE_STEPS, "STEP_S": "0"}).fit(
        logs=False, jobs_root=str(tmp / "jobs"))
    return model_weights(job.model_data)
