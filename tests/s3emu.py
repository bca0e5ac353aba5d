"""An S3-compatible server for the dataset tests: moto's server mode (an emulator of S3, not AWS),
started as a real process per test, with moto's request recorder on so tests can count the
downloads (GET of an object) the cache saves."""
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

KEY_ID, SECRET = "AKIAEXAMPLE", "example-secret"


class S3Emulator:
    def __init__(self, port: int, recording: Path, proc: subprocess.Popen):
        self.port, self.recording, self.proc = port, recording, proc
        self.url = f"http://127.0.0.1:{port}"

    def store(self, bucket: str, prefix: str = ""):
        from obstore.store import S3Store

        return S3Store(bucket, prefix=prefix or None, endpoint=self.url, access_key_id=KEY_ID,
                       secret_access_key=SECRET, region="us-east-1", allow_http=True)

    def make_bucket(self, bucket: str) -> None:
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/{bucket}", method="PUT"))

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.store(bucket).put(key, data)

    def object_gets(self, bucket: str) -> list[str]:
        """The object downloads the server answered (GETs of a key; listings excluded)."""
        if not self.recording.exists():
            return []
        gets = []
        for line in self.recording.read_text().splitlines():
            entry = json.loads(line)
            path = entry["url"].split("://", 1)[-1].split("/", 1)[-1].split("?", 1)[0]
            if entry["method"] == "GET" and path.startswith(f"{bucket}/") and path != f"{bucket}/":
                gets.append(path)
        return gets


@pytest.fixture
def s3_server(tmp_path, settings):
    """The emulator on 127.0.0.1:<port>, which Cairn is allowed to fetch from (a loopback address
    is refused otherwise: apps/core/netguard.py): server-wide here, so that every test using it
    registers datasets; tests/storage/test_fetch_guard.py checks the per-pool allowance."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    recording = tmp_path / "moto-recording.jsonl"
    env = {"PATH": "/usr/bin:/bin", "MOTO_ENABLE_RECORDING": "1", "MOTO_RECORDER_FILEPATH": str(recording),
           "HOME": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("moto's S3 server did not start") from None
            time.sleep(0.1)
    settings.CAIRN = {**settings.CAIRN,
                      "FETCH_ALLOWED_HOSTS": [*settings.CAIRN.get("FETCH_ALLOWED_HOSTS", []), f"127.0.0.1:{port}"]}
    yield S3Emulator(port, recording, proc)
    proc.kill()
    proc.wait(timeout=10)


def s3_location(s3: S3Emulator, bucket: str, prefix: str = "") -> dict:
    return {"bucket": bucket, "prefix": prefix, "endpoint_url": s3.url, "region": "us-east-1"}


CREDENTIALS = {"access_key_id": KEY_ID, "secret_access_key": SECRET}
