import json


def check(job):
    for rank, host in ((0, "algo-1"), (1, "algo-1"), (2, "algo-2"), (3, "algo-2")):
        result = json.loads((job.host_dir(host) / "model" / f"result-{rank}.json").read_text())
        assert len(result["losses"]) == 3, result
    assert "equal the one-process reference" in job.console
    # accepted, and said so once per process
    assert "sharded_data_parallel_degree=2: parameters, gradients and optimizer states are not sharded" in job.console
