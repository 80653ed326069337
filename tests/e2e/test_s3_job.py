"""A whole job whose channels, outputs and checkpoints go through a real moto S3 server."""
from __future__ import annotations

import io
import json
import tarfile

SCRIPT = r'''
host = os.environ["SM_CURRENT_HOST"]
data = sorted(os.listdir(os.environ["SM_CHANNEL_TRAINING"]))
ckpt = os.environ["SMDIST_CHECKPOINT_DIR"]
resumed = sorted(os.listdir(ckpt))
with open(os.path.join(os.environ["SM_MODEL_DIR"], f"{host}.json"), "w") as f:
    json.dump({"data": data, "resumed": resumed, "token": os.environ.get("API_TOKEN")}, f)
os.makedirs(os.environ["SM_OUTPUT_DATA_DIR"], exist_ok=True)
open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"{host}.txt"), "w").write("metrics")
open(os.path.join(ckpt, f"{host}-step-2.pt"), "w").write("new")
'''


def test_s3_channels_outputs_and_checkpoints(ws, s3):
    bucket = s3.bucket
    for key in ("data/a.bin", "data/b.bin", "ckpt/step-1.pt"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"x")
    plan = ws.plan(SCRIPT, strategy="single", pph=1, inputs={"training": f"s3://{bucket}/data"},
                   output_path=f"s3://{bucket}/out", checkpoint_s3_uri=f"s3://{bucket}/ckpt",
                   environment={"API_TOKEN": "s3cr3t-value"})
    record, error = ws.run(plan)
    assert error is None, error
    prefix = f"out/{plan.job_name}/output"
    assert record["model_data"] == f"s3://{bucket}/{prefix}/model.tar.gz"
    body = s3.get_object(Bucket=bucket, Key=f"{prefix}/model.tar.gz")["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(body)) as tar:
        seen = {m.name: json.load(tar.extractfile(m)) for m in tar.getmembers()}
    assert seen == {f"algo-{i}.json": {"data": ["a.bin", "b.bin"], "resumed": ["step-1.pt"], "token": "s3cr3t-value"}
                    for i in (1, 2)}
    with tarfile.open(fileobj=io.BytesIO(s3.get_object(Bucket=bucket,
                                                       Key=f"{prefix}/output.tar.gz")["Body"].read())) as tar:
        assert sorted(tar.getnames()) == ["algo-1.txt", "algo-2.txt"]
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="ckpt/")["Contents"])
    assert keys == ["ckpt/algo-1-step-2.pt", "ckpt/algo-2-step-2.pt", "ckpt/step-1.pt"]
    # The secret reached the processes, but no file of the launcher holds it (the script's own
    # model files do, and run/environment.json is the runtime's 0600 debug copy of its env).
    job = ws.jobs / plan.job_name
    written = [job / "plan.json", job / "job.json", *(job / "logs").iterdir(),
               *(job / "hosts").glob("*/opt/ml/input/config/*.json")]
    assert len(written) == 2 + 2 + 2 * 4
    for path in written:
        assert b"s3cr3t-value" not in path.read_bytes(), path
