import json


def check(job):
    losses = None
    for rank, host in ((0, "algo-1"), (1, "algo-1"), (2, "algo-2"), (3, "algo-2")):
        result = json.loads((job.host_dir(host) / "model" / f"result-{rank}.json").read_text())
        assert result["world"] == 4 and result["backend"] == "smddp" and len(result["losses"]) == 4, result
        losses = losses or result["losses"]
        assert result["losses"] == losses  # every rank saw the same averaged loss
    assert "equals the one-process reference" in job.console
