import json
from pathlib import Path

REQUIRES = ["sagemaker_training"]


def _seen(job, host):
    """The host's tree as its script sees it: /opt/ml where the runtime mounted it there, else the sandbox tree."""
    isolation = json.loads((job.host_dir(host) / "run" / "isolation.json").read_text())
    return Path("/opt/ml") if isolation["opt_ml"] else job.host_dir(host)


def check(job):
    for host, ranks in (("algo-1", (0, 1)), ("algo-2", (2, 3))):
        for rank in ranks:
            seen = json.loads((job.host_dir(host) / "model" / f"env-{host}-rank{rank}.json").read_text())
            assert seen["current_host"] == host and seen["is_master"] == (host == "algo-1"), seen
            assert seen["model_dir"] == str(_seen(job, host) / "model"), seen
            assert seen["channel_input_dirs"] == {"training": str(_seen(job, host) / "input" / "data" / "training")}
    assert "rank 3: sagemaker_training sees host algo-2 of ['algo-1', 'algo-2']" in job.console
