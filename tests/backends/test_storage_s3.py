"""s3:// channel downloads: Ctrl-C while an object is being fetched stops `smdist run` promptly, leaving no file
under the object's name. The moto server is reached through a TCP relay that holds every response to a request for
the object back for LATENCY_S (a slow store, as a large object on S3 can be): the signal comes while the request is
in flight, and the run must end well before the response would have come."""
from __future__ import annotations

import io
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

LATENCY_S = 60.0  # far above the time a loaded machine needs to act on Ctrl-C: "promptly" is < LATENCY_S / 2
OBJECT_KEY = "big/data.bin"
OBJECT_BYTES = 16 * 1024 * 1024   # above boto3's multipart threshold: several ranged requests at once


class SlowRelay:
    """Forwards 127.0.0.1:<port> to the moto server; a response to a request that names OBJECT_KEY starts LATENCY_S
    after it (`held` is set from then on), any other at once."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.held = threading.Event()  # a response to the object's request is being held back
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            asked = threading.Event()  # a request for the object went up: hold its response back
            threading.Thread(target=self._pipe, args=(client, upstream, asked, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, asked, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, asked: threading.Event, response: bool) -> None:
        try:
            while data := src.recv(64 * 1024):
                if not response:
                    if OBJECT_KEY.encode() in data:
                        asked.set()
                elif asked.is_set():
                    self.held.set()
                    time.sleep(LATENCY_S)
                    asked.clear()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def slow_endpoint(moto_endpoint, s3, monkeypatch):
    relay = SlowRelay(int(moto_endpoint.rsplit(":", 1)[1]))
    monkeypatch.setenv("SMDIST_S3_ENDPOINT_URL", f"http://127.0.0.1:{relay.port}")
    yield relay
    relay.close()


def test_ctrl_c_during_a_large_channel_download_stops_promptly(tmp_path: Path, s3, slow_endpoint) -> None:
    s3.upload_fileobj(io.BytesIO(bytes(OBJECT_BYTES)), s3.bucket, OBJECT_KEY)
    (tmp_path / "train.py").write_text("print('never runs')\n")
    job = tmp_path / "job.yaml"
    job.write_text("framework: pytorch\nentry_point: train.py\ninstance_type: local\ninstance_count: 1\n"
                   f"framework_version: '2.3'\npy_version: py311\ninputs:\n  training: s3://{s3.bucket}/big/\n")
    jobs = tmp_path / "jobs"
    cli = "import sys; from smdist_launcher.cli.main import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", cli, "run", str(job), "--jobs-dir", str(jobs), "--job-name",
                             "s3-interrupted", "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    staging = jobs / "s3-interrupted" / "staging" / "training"
    deadline = time.monotonic() + 240  # a bound on the start-up, not a measurement
    while not slow_endpoint.held.is_set():  # listed, the channel folder made, the object's request in flight
        assert proc.poll() is None, proc.communicate()[0]
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"the download never started: {proc.communicate()[0]}")
        time.sleep(0.05)
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    out, _ = proc.communicate(timeout=120)
    took = time.monotonic() - sent
    assert proc.returncode == 130, out
    assert took < LATENCY_S / 2, f"Ctrl-C took {took:.1f} s to stop the download"  # did not wait for the response
    assert not (staging / "data.bin").exists() and list(staging.glob("*")) == []
    assert "stopped by Ctrl-C during staging" in out
