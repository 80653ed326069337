import json


def check(job):
    seen = set()
    for rank, host in ((0, "algo-1"), (1, "algo-1"), (2, "algo-2"), (3, "algo-2")):
        result = json.loads((job.host_dir(host) / "model" / f"result-{rank}.json").read_text())
        assert len(result["losses"]) == 3 and result["distributed"], result
        seen.add((result["pp_rank"], result["tp_rank"]))
    assert seen == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert "equal the one-process reference" in job.console
