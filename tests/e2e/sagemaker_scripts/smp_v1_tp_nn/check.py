import json


def check(job):
    for rank, host in ((0, "algo-1"), (1, "algo-1"), (2, "algo-2"), (3, "algo-2")):
        result = json.loads((job.host_dir(host) / "model" / f"result-{rank}.json").read_text())
        assert len(result["losses"]) == 3 and result["tp_rank"] == rank % 2, result
        assert all(abs(a - b) < 1e-4 for a, b in zip(result["losses"], result["reference"], strict=True)), result
    assert (job.host_dir("algo-1") / "model" / "model.pt").is_file()
