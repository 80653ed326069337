import json

REQUIRES = ["mpi4py", "numpy"]


def check(job):
    for rank, host in ((0, "algo-1"), (1, "algo-1"), (2, "algo-2"), (3, "algo-2")):
        result = json.loads((job.host_dir(host) / "model" / f"mpi-rank-{rank}.json").read_text())
        assert result["host"] == host and result["size"] == 4 and result["local_size"] == 2, result
        isolation = job.host_dir(host) / "run" / "isolation.json"
        if isolation.is_file() and json.loads(isolation.read_text())["hostname"]:
            assert result["hostname"] == host, result  # the host's own identity, as Open MPI sees it
    gathered = json.loads((job.host_dir("algo-1") / "model" / "mpi-rank-0.json").read_text())["gathered"]
    assert [(g["rank"], g["host"], g["local_rank"]) for g in gathered] == [
        (0, "algo-1", 0), (1, "algo-1", 1), (2, "algo-2", 0), (3, "algo-2", 1)], gathered
    assert "rank 3/4 on algo-2: Bcast, Allreduce, Gather and 8 MiB messages ok" in job.console
