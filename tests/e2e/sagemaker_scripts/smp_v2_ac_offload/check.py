"""Offloading was on (SMP's, horizon 2), the losses equal the reference, and on CPU each rank said once that
there is no GPU to offload from."""
import json

RANKS = {"algo-1": (0, 1), "algo-2": (2, 3)}


def check(job):
    for host, ranks in RANKS.items():
        for r in ranks:
            out = json.loads((job.host_dir(host) / "model" / f"result-{r}.json").read_text())
            assert out["offloading"] is True and out["horizon"] == 2
            pairs = zip(out["losses"], out["ref_losses"], strict=True)
            assert all(abs(a - b) <= 1e-5 * abs(b) + 1e-6 for a, b in pairs), out
        log = job.logs(host)
        assert log.count("no GPU to offload from") == len(ranks), log[-2000:]
