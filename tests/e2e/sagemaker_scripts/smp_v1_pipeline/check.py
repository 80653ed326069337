import json


def check(job):
    for rank, host in ((0, "algo-1"), (1, "algo-1"), (2, "algo-2"), (3, "algo-2")):
        result = json.loads((job.host_dir(host) / "model" / f"result-{rank}.json").read_text())
        assert result["pp_rank"] == rank % 2 and len(result["losses"]) == 3, result
    assert "equal the one-process reference" in job.console
