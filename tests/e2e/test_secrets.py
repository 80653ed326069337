"""Secrets reach the script and nothing else: a real local job, then every byte of its folder is searched."""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
from pathlib import Path

SECRET_HP = "hf-SeCrEt-hp-4242"
SECRET_ENV = "env-SeCrEt-77"
CALLER_SECRET = "caller-SeCrEt-session-99"

# The script gets sha256 digests, not the secrets: its source is copied into the job folder.
CHECK = r'''
import argparse, hashlib
dist.init_process_group("gloo")
rank = dist.get_rank()
parser = argparse.ArgumentParser()
parser.add_argument("--hub_token")
parser.add_argument("--want_hp")
parser.add_argument("--want_env")
args, _ = parser.parse_known_args()
digest = lambda s: hashlib.sha256(str(s).encode()).hexdigest()
with open(os.path.join(os.environ["SM_INPUT_CONFIG_DIR"], "hyperparameters.json")) as f:
    in_file = json.loads(json.load(f)["hub_token"])
seen = {"argv": digest(args.hub_token) == args.want_hp,
        "SM_HPS": digest(json.loads(os.environ["SM_HPS"])["hub_token"]) == args.want_hp,
        "SM_HP_HUB_TOKEN": digest(os.environ["SM_HP_HUB_TOKEN"]) == args.want_hp,
        "hyperparameters.json": digest(in_file) == args.want_hp,
        "environment": digest(os.environ.get("HF_TOKEN")) == args.want_env}
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"seen-{rank}.json"), "w") as f:
    json.dump(seen, f)
print(f"rank {rank} got its secrets: {all(seen.values())}", flush=True)
dist.barrier()
if rank == 1:
    raise SystemExit(3)  # a failed job: failure.json and the diagnosis are searched too
'''


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _texts(root: Path):
    """(path, bytes) of every file below root, archives opened (model.tar.gz, output.tar.gz)."""
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            yield path, data
            if path.name.endswith(".tar.gz"):
                with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data))) as tar:
                    for m in tar.getmembers():
                        if m.isfile():
                            yield Path(f"{path}!{m.name}"), tar.extractfile(m).read()


def test_secret_hyperparameters_and_env_reach_only_the_script(ws, monkeypatch):
    monkeypatch.setenv("AWS_SESSION_TOKEN", CALLER_SECRET)
    plan = ws.plan(CHECK, strategy="torch_distributed", pph=1,
                   hyperparameters={"hub_token": SECRET_HP, "want_hp": _digest(SECRET_HP),
                                    "want_env": _digest(SECRET_ENV), "epochs": 1},
                   environment={"HF_TOKEN": SECRET_ENV})
    # Every rendering of the plan is redacted, argv included.
    for text in (plan.to_json(), plan.to_yaml(), json.dumps(plan.to_dict())):
        assert SECRET_HP not in text and SECRET_ENV not in text
    assert plan.to_dict()["hyperparameters"]["hub_token"] == "***REDACTED***"
    assert plan.to_dict()["hosts"][0]["argv"][plan.hosts[0].argv.index("--hub_token") + 1] == "***REDACTED***"

    record, error = ws.run(plan, logs=False)
    assert record["status"] == "Failed" and error is not None
    job_dir = ws.jobs / plan.job_name
    with tarfile.open(job_dir / "output" / "model.tar.gz") as tar:
        seen = [json.load(tar.extractfile(m)) for m in tar.getmembers() if m.name.endswith(".json")]
    assert len(seen) == 2 and all(all(s.values()) for s in seen), seen

    leaks = [str(p) for p, data in _texts(job_dir)
             for secret in (SECRET_HP, SECRET_ENV, CALLER_SECRET) if secret.encode() in data]
    assert leaks == []
    assert SECRET_HP not in error.diagnosis and SECRET_ENV not in error.diagnosis
    # what the records do show: the marker where the values were
    failure = json.loads((job_dir / "hosts" / "algo-2" / "opt" / "ml" / "output" / "failure.json").read_text())
    assert "***REDACTED***" in failure["command"]
    hps = json.loads(
        (job_dir / "hosts" / "algo-1" / "opt" / "ml" / "input" / "config" / "hyperparameters.json").read_text())
    assert json.loads(hps["hub_token"]) == "***REDACTED***" and hps["epochs"] == "1"
    # Item 2: the host's environment record holds what the job set, not the caller's environment.
    env = json.loads((job_dir / "hosts" / "algo-1" / "opt" / "ml" / "run" / "environment.json").read_text())
    assert "AWS_SESSION_TOKEN" not in env and env["HF_TOKEN"] == "***REDACTED***" and "SM_HPS" in env
    assert "HOME" not in env and env["SM_CURRENT_HOST"] == "algo-1"
    assert stat.S_IMODE(
        os.stat(job_dir / "hosts" / "algo-1" / "opt" / "ml" / "run" / "environment.json").st_mode) == 0o600
