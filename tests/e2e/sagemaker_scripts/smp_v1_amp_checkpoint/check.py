import json


def check(job):
    for rank, host in ((0, "algo-1"), (1, "algo-1"), (2, "algo-2"), (3, "algo-2")):
        result = json.loads((job.host_dir(host) / "model" / f"result-{rank}.json").read_text())
        assert result["resumed"] == result["expected"] and len(result["expected"]) == 2, result
        assert {"newest", "full_model.pt", "step2_partial"} <= set(result["files"]), result
        assert {"model_0_0.pt", "model_0_1.pt", "optimizer_0_0.pt", "user_content.pt"} <= set(result["partial"]), result
        # each host wrote its own copy under its own /opt/ml/checkpoints
        assert (job.host_dir(host) / "checkpoints" / "step2_partial" / "model_0_1.pt").is_file()
