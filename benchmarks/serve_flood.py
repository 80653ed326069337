"""`smdist serve` under a connection flood (docs/security.md, "serve's limits"): unauthenticated connections held
open against it while a caller with the key calls DescribeTrainingJob in a loop. Loopback only, bounded in count and
time.

    .venv/bin/python benchmarks/serve_flood.py [--flood 200] [--seconds 30] [--out results.json]

A real serve process (process backend, moto's server as its S3) runs one short job first, so DescribeTrainingJob
answers a full record. Then the same loop of DescribeTrainingJob calls (boto3, serve's profile) runs twice: alone
(baseline), and while `--flood` unauthenticated connections are held open, half of them trickling header bytes
(slowloris, a byte a second), half announcing a 1,000,000-byte body and sending it in 64 KiB pieces (and a tenth of
those a 100 MiB one); a connection the server closes is reopened a second later, so the flood stays at its size.
Reports every call answered or not, their p50/p99 latency in each phase (and the ratio), serve's peak RSS and thread
count (psutil), and what became of the flood's connections."""
from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import platform
import selectors
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

TRAIN = 'print("hello", flush=True)\n'
REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, path: str = "/") -> None:
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"{url} exited with {proc.returncode}")
        try:
            urllib.request.urlopen(urllib.request.Request(url + path, data=b"{}", method="POST"), timeout=1)
            return
        except urllib.error.HTTPError:
            return  # an answer (an error one): it is up
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"{url} did not answer") from None
            time.sleep(0.1)


class Flood:
    """`size` unauthenticated connections held open against serve, each reopened a second after serve closes it."""

    def __init__(self, port: int, size: int) -> None:
        self.port, self.size = port, size
        self.opened = self.closed_by_server = self.answered = 0
        self.body_bytes_sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _head(self, i: int) -> bytes:
        host = f"127.0.0.1:{self.port}"
        if i % 2 == 0:  # slowloris: a request line, then header bytes one at a time
            return f"POST / HTTP/1.1\r\nHost: {host}\r\nX-Amz-Target: SageMaker.ListTrainingJobs\r\n".encode()
        length = 100 * 2**20 if i % 20 == 1 else 1_000_000
        return (f"POST / HTTP/1.1\r\nHost: {host}\r\nX-Amz-Target: SageMaker.CreateTrainingJob\r\n"
                f"Content-Type: application/x-amz-json-1.1\r\nContent-Length: {length}\r\n\r\n").encode()

    def _open(self, sel: selectors.BaseSelector, i: int) -> None:
        sock = socket.socket()
        sock.setblocking(False)
        try:
            sock.connect(("127.0.0.1", self.port))
        except BlockingIOError:
            pass
        self.opened += 1
        sel.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, {"i": i, "head": self._head(i), "next": 0.0})

    def _run(self) -> None:
        sel = selectors.DefaultSelector()
        for i in range(self.size):
            self._open(sel, i)
        reopen: list[tuple[float, int]] = []
        piece = b" " * 65536
        while not self._stop.is_set():
            now = time.monotonic()
            for when, i in [r for r in reopen if r[0] <= now]:
                reopen.remove((when, i))
                self._open(sel, i)
            for key, events in sel.select(timeout=0.05):
                sock, state = key.fileobj, key.data
                assert isinstance(sock, socket.socket)
                closed = False
                if events & selectors.EVENT_READ:
                    try:
                        data = sock.recv(65536)
                        self.answered += bool(data)
                        closed = not data
                    except (ConnectionError, BlockingIOError):
                        closed = True
                if not closed and events & selectors.EVENT_WRITE and now >= state["next"]:
                    try:
                        if state["head"]:
                            sent = sock.send(state["head"])
                            state["head"] = state["head"][sent:]
                        elif state["i"] % 2 == 0:
                            sock.send(b"a")  # one more byte of a header that never ends
                            state["next"] = now + 1.0
                        else:
                            self.body_bytes_sent += sock.send(piece)
                            state["next"] = now + 0.05
                    except BlockingIOError:
                        pass
                    except ConnectionError:
                        closed = True
                if closed:
                    sel.unregister(sock)
                    sock.close()
                    self.closed_by_server += 1
                    reopen.append((now + 1.0, state["i"]))
        for key in list(sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]

    def __enter__(self) -> Flood:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


class Sampler:
    """serve's peak RSS and thread count, sampled every 50 ms."""

    def __init__(self, pid: int) -> None:
        import psutil

        self._proc = psutil.Process(pid)
        self.peak_rss = self.peak_threads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak_rss = max(self.peak_rss, self._proc.memory_info().rss)
            self.peak_threads = max(self.peak_threads, self._proc.num_threads())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _calls(sagemaker: Any, name: str, seconds: float, max_calls: int) -> dict[str, Any]:
    """DescribeTrainingJob in a loop for `seconds` (at most `max_calls`): each call's latency and outcome."""
    latencies, failures, retried = [], [], 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(latencies) + len(failures) < max_calls:
        start = time.perf_counter()
        try:
            answer = sagemaker.describe_training_job(TrainingJobName=name)
            latencies.append(time.perf_counter() - start)
            retried += answer["ResponseMetadata"].get("RetryAttempts", 0) > 0
            assert answer["TrainingJobName"] == name
        except Exception as e:  # noqa: BLE001 - counted: an unanswered call is the figure this measures
            failures.append(f"{type(e).__name__}: {e}")
    ordered = sorted(latencies)
    pick = lambda q: round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2) if ordered else None  # noqa: E731
    return {"calls": len(latencies) + len(failures), "answered": len(latencies), "unanswered": len(failures),
            "answered_after_a_retry": retried, "failures": failures[:5],
            "p50_ms": round(statistics.median(latencies) * 1000, 2) if latencies else None,
            "p99_ms": pick(0.99), "max_ms": pick(1.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flood", type=int, default=200, help="unauthenticated connections held open (default 200)")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase (default 30)")
    parser.add_argument("--max-calls", type=int, default=20000, help="calls per phase at most (default 20000)")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    import boto3
    from botocore.config import Config

    from smdist_launcher.serve.connections import DEFAULT_LIMITS

    with tempfile.TemporaryDirectory(prefix="smdist-serve-flood-") as folder:
        tmp = Path(folder)
        moto_port, serve_port = _free_port(), _free_port()
        moto = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(moto_port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        s3_url, url = f"http://127.0.0.1:{moto_port}", f"http://127.0.0.1:{serve_port}"
        env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_REGION": REGION, "SMDIST_JOBS_DIR": str(tmp / "jobs"),
               "AWS_SHARED_CREDENTIALS_FILE": str(tmp / "credentials"),
               "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
        log = open(tmp / "serve.log", "wb")  # noqa: SIM115 - closed below
        serve = subprocess.Popen([sys.executable, "-m", "smdist_launcher.cli.main", "serve", "--port",
                                  str(serve_port), "--s3-endpoint-url", s3_url, "--backend", "process"],
                                 env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_http(s3_url, moto, "/moto-api/")
            _wait_http(url, serve)
            s3 = boto3.client("s3", endpoint_url=s3_url, region_name=REGION, aws_access_key_id="testing",
                              aws_secret_access_key="testing")
            s3.create_bucket(Bucket="flood")
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                info = tarfile.TarInfo("train.py")
                info.size = len(TRAIN)
                tar.addfile(info, io.BytesIO(TRAIN.encode()))
            s3.put_object(Bucket="flood", Key="code/sourcedir.tar.gz", Body=buf.getvalue())
            s3.put_object(Bucket="flood", Key="data/train/part-0.txt", Body=b"1\n")
            os.environ["AWS_SHARED_CREDENTIALS_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"]  # serve's profile
            session = boto3.Session(profile_name="smdist-serve")
            sagemaker = session.client("sagemaker", endpoint_url=url, region_name=REGION,
                                       config=Config(retries={"mode": "standard", "max_attempts": 3}))
            name = "flood-target"
            sagemaker.create_training_job(
                TrainingJobName=name, RoleArn="arn:aws:iam::123456789012:role/R",
                AlgorithmSpecification={"TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/"
                                                         "pytorch-training:2.3-cpu-py311", "TrainingInputMode": "File"},
                HyperParameters={"sagemaker_program": '"train.py"',
                                 "sagemaker_submit_directory": '"s3://flood/code/sourcedir.tar.gz"'},
                InputDataConfig=[{"ChannelName": "train", "DataSource": {"S3DataSource": {
                    "S3DataType": "S3Prefix", "S3Uri": "s3://flood/data/train",
                    "S3DataDistributionType": "FullyReplicated"}}}],
                OutputDataConfig={"S3OutputPath": "s3://flood/output"},
                ResourceConfig={"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
                StoppingCondition={"MaxRuntimeInSeconds": 600})
            deadline = time.monotonic() + 300
            while (status := sagemaker.describe_training_job(TrainingJobName=name)["TrainingJobStatus"]) not in (
                    "Completed", "Failed", "Stopped"):
                if time.monotonic() > deadline:
                    raise SystemExit(f"the job did not end: {status}")
                time.sleep(0.2)
            sampler = Sampler(serve.pid)
            baseline = _calls(sagemaker, name, args.seconds, args.max_calls)
            idle_rss = sampler.peak_rss
            with Flood(serve_port, args.flood) as flood:
                time.sleep(2)  # the flood at its size before the first call
                flooded = _calls(sagemaker, name, args.seconds, args.max_calls)
            sampler.stop()
            ratio = (flooded["p99_ms"] / baseline["p99_ms"]) if flooded["p99_ms"] and baseline["p99_ms"] else None
            result = {
                "date": date.today().isoformat(), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                "python": platform.python_version(), "job_status": status,
                "serve_limits": dataclasses.asdict(DEFAULT_LIMITS),
                "flood": {"connections_held": args.flood, "slowloris": (args.flood + 1) // 2,
                          "oversized": args.flood // 2, "opened": flood.opened,
                          "closed_by_serve": flood.closed_by_server, "answers_received": flood.answered,
                          "body_bytes_sent": flood.body_bytes_sent},
                "phase_seconds": args.seconds, "baseline": baseline, "flooded": flooded,
                "p99_flooded_over_baseline": round(ratio, 2) if ratio else None,
                "serve_peak_rss_mib": round(sampler.peak_rss / 2**20, 1),
                "serve_rss_before_flood_mib": round(idle_rss / 2**20, 1),
                "serve_peak_threads": sampler.peak_threads,
                "targets": {"all_answered": flooded["unanswered"] == 0,
                            "p99_under_2s": bool(flooded["p99_ms"] and flooded["p99_ms"] < 2000),
                            "rss_under_200_mib": sampler.peak_rss < 200 * 2**20},
            }
        finally:
            serve.terminate()
            moto.terminate()
            serve.wait(timeout=60)
            moto.wait(timeout=60)
            log.close()
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
