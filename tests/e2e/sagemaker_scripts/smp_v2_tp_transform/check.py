"""Every rank (both TP ranks of both data-parallel groups) trained like the one-process reference."""
import json

RANKS = {"algo-1": (0, 1), "algo-2": (2, 3)}


def check(job):
    for host, ranks in RANKS.items():
        for r in ranks:
            out = json.loads((job.host_dir(host) / "model" / f"result-{r}.json").read_text())
            assert out["tp_rank"] == r % 2
            pairs = zip(out["losses"], out["ref_losses"], strict=True)
            assert all(abs(a - b) <= 1e-5 * abs(b) + 1e-6 for a, b in pairs), out
    assert "model.pt" in job.tar_names()
