"""s3:// submit directories through boto3 against a real moto server on 127.0.0.1."""
from __future__ import annotations

import io
import tarfile

import pytest

from smdist_launcher.container.submit_directory import UnsafeArchiveError, prepare_code

boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")


@pytest.fixture
def s3(monkeypatch):
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{server._server.server_port}"
        for k, v in {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                     "AWS_DEFAULT_REGION": "us-east-1"}.items():
            monkeypatch.setenv(k, v)
        client = boto3.client("s3")
        client.create_bucket(Bucket="code-bucket")
        yield client
    finally:
        server.stop()


def _targz(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_s3_sourcedir_unpacked(s3, tmp_path):
    s3.put_object(Bucket="code-bucket", Key="job/source/sourcedir.tar.gz", Body=_targz({"train.py": b"print(1)"}))
    assert "unpacked s3://code-bucket/job/source/sourcedir.tar.gz" in prepare_code("s3://code-bucket/job/source/sourcedir.tar.gz",
                                                                        tmp_path / "code")
    assert (tmp_path / "code" / "train.py").read_bytes() == b"print(1)"


def test_s3_unsafe_archive_refused(s3, tmp_path):
    s3.put_object(Bucket="code-bucket", Key="evil.tar.gz", Body=_targz({"../evil.py": b"x"}))
    with pytest.raises(UnsafeArchiveError):
        prepare_code("s3://code-bucket/evil.tar.gz", tmp_path / "code")
    assert not (tmp_path / "evil.py").exists()


def test_s3_source_follows_the_projects_endpoint_override(moto_endpoint, monkeypatch, tmp_path):
    """$SMDIST_S3_ENDPOINT_URL alone (what local mode and the backends honour) decides where code comes from:
    boto3 on its own would fetch a bucket of that name from AWS."""
    for key in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in {"SMDIST_S3_ENDPOINT_URL": moto_endpoint, "AWS_ACCESS_KEY_ID": "testing",
                       "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                       # a wrong default endpoint: the test fails at once instead of trying AWS for a minute
                       "AWS_MAX_ATTEMPTS": "1"}.items():
        monkeypatch.setenv(key, value)
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="override-bucket")
    client.put_object(Bucket="override-bucket", Key="src/sourcedir.tar.gz", Body=_targz({"train.py": b"print(2)"}))
    prepare_code("s3://override-bucket/src/sourcedir.tar.gz", tmp_path / "code")
    assert (tmp_path / "code" / "train.py").read_bytes() == b"print(2)"
