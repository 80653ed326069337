import json


def check(job):
    for rank, host in ((0, "algo-1"), (1, "algo-1"), (2, "algo-2"), (3, "algo-2")):
        result = json.loads((job.host_dir(host) / "model" / f"result-{rank}.json").read_text())
        assert result["world"] == 4 and result["local_size"] == 2 and result["local_rank"] == rank % 2, result
        assert result["steps"] == 8 and abs(result["loss"] - result["reference_loss"]) < 1e-5, result
    assert (job.host_dir("algo-1") / "model" / "model.pt").is_file()
