from __future__ import annotations

from pathlib import Path

from smdist_launcher.backends.api import Submission
from smdist_launcher.backends.toolkit.job_metrics import MetricsSettings, sample_interval, sampled_hosts
from smdist_launcher.jobspec.estimator_args import EstimatorArgs

from ..plans import tiny_plan


def test_the_submission_carries_the_definitions_and_step_patterns() -> None:
    args = EstimatorArgs.model_validate({
        "entry_point": "train.py", "instance_type": "local", "instance_count": 1, "framework_version": "2.3",
        "py_version": "py311", "metric_definitions": [{"Name": "loss", "Regex": "loss=([0-9.]+)"}],
        "resilience": {"log_monitoring": [{"name": "steps", "pattern": r"step (\d+)", "expected_every_s": 60}]}})
    submission = Submission(plan=tiny_plan(), settings=args)
    assert submission.metric_definitions == [{"Name": "loss", "Regex": "loss=([0-9.]+)"}]
    assert submission.step_patterns == [r"step (\d+)"]
    assert Submission(plan=tiny_plan()).metric_definitions == []  # a bare plan: nothing to parse


def test_settings_travel_in_the_job_folder(tmp_path: Path) -> None:
    settings = MetricsSettings([{"Name": "loss", "Regex": "loss=([0-9.]+)"}], [r"step (\d+)"])
    settings.save(tmp_path)
    assert MetricsSettings.load(tmp_path) == settings
    assert MetricsSettings.load(tmp_path / "elsewhere") == MetricsSettings()


def test_sampled_hosts_keep_nvml_indices_only(tmp_path: Path) -> None:
    hosts = sampled_hosts({"algo-1": 10, "algo-2": 11}, {"algo-1": tmp_path}, {"algo-1": ["0", "1"],
                                                                               "algo-2": ["GPU-1f2e"]})
    assert [(h.name, h.pid, h.disk_path, h.gpus) for h in hosts] == [("algo-1", 10, str(tmp_path), [0, 1]),
                                                                      ("algo-2", 11, None, [])]


def test_the_sample_interval_comes_from_the_environment() -> None:
    assert sample_interval({}) == 5.0
    assert sample_interval({"SMDIST_METRICS_INTERVAL_S": "0.5"}) == 0.5
    assert sample_interval({"SMDIST_METRICS_INTERVAL_S": "often"}) == 5.0
    assert sample_interval({"SMDIST_METRICS_INTERVAL_S": "0"}) == 0.0  # sampling off
