"""Every rank trained like the one-process reference; rank 0 exported the full model."""
import json

RANKS = {"algo-1": (0, 1), "algo-2": (2, 3)}


def check(job):
    for host, ranks in RANKS.items():
        model_dir = job.host_dir(host) / "model"
        for r in ranks:
            out = json.loads((model_dir / f"result-{r}.json").read_text())
            assert len(out["losses"]) == 4
            pairs = zip(out["losses"], out["ref_losses"], strict=True)
            assert all(abs(a - b) <= 1e-5 * abs(b) + 1e-6 for a, b in pairs), out
    assert "pytorch_model.bin" in job.tar_names()
