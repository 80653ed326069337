import json

REQUIRES = ["sagemaker_training"]


def check(job):
    for host, ranks in (("algo-1", (0, 1)), ("algo-2", (2, 3))):
        for rank in ranks:
            seen = json.loads((job.host_dir(host) / "model" / f"env-{host}-rank{rank}.json").read_text())
            assert seen["current_host"] == host and seen["is_master"] == (host == "algo-1"), seen
            assert seen["model_dir"] == str(job.host_dir(host) / "model"), seen
            assert seen["channel_input_dirs"] == {"training": str(job.host_dir(host) / "input" / "data" / "training")}
    assert "rank 3: sagemaker_training sees host algo-2 of ['algo-1', 'algo-2']" in job.console
