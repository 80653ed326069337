"""Each host's absolute /opt/ml writes are in that host's own tree; model.tar.gz aggregates every host's model dir
(SageMaker: "SageMaker aggregates the result in a TAR file"; same names: a later host's file wins, as in local mode)."""
import json


def check(job):
    for host in job.hosts:
        tree = job.host_dir(host)
        assert sorted(p.name for p in (tree / "model").iterdir()) == ["x", f"x-{host}"], host
        assert (tree / "model" / "x").read_text() == host
        assert sorted(p.name for p in (tree / "checkpoints").iterdir()) == sorted(
            f"ckpt-{host}-rank{r}.pt" for r in ({"algo-1": (0, 1), "algo-2": (2, 3)}[host]))
        out = json.loads((tree / "output" / "data" / f"out-{host}.json").read_text())
        assert out["host"] == host
        assert "absolute /opt/ml paths are NOT private" not in job.logs(host)
    assert sorted(job.tar_names()) == ["x", "x-algo-1", "x-algo-2"], job.tar_names()
    assert job.tar_text("x-algo-1") == "algo-1" and job.tar_text("x-algo-2") == "algo-2"
    assert sorted(job.tar_names("output")) == ["out-algo-1.json", "out-algo-2.json"]
