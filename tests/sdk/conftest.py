"""Fixtures for the SDK tests: a fake Cairn API on a real socket, an isolated config file,
and `run(...)` to call the CLI in-process and capture its exit code, stdout and stderr."""
from __future__ import annotations

import io
import json
import socket
from dataclasses import dataclass

import pytest

from cairn import cli
from tests.sdk.fakeserver import TOKEN, FakeCairn


@pytest.fixture(autouse=True)
def _isolated_data_dir():
    """The SDK touches no Django settings: override the suite-wide fixture of that name so
    these tests need neither Django nor a database."""
    yield


@pytest.fixture(autouse=True)
def cairn_env(tmp_path, monkeypatch):
    """A private config path and none of the caller's CAIRN_* settings."""
    for var in ("CAIRN_URL", "CAIRN_TOKEN", "CAIRN_PROJECT", "CAIRN_DEBUG", "COLUMNS",
                "FORCE_COLOR"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "home" / ".config" / "cairn" / "config.json"
    monkeypatch.setenv("CAIRN_CONFIG", str(path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(cli, "POLL_INTERVAL", 0.01)
    return path


@pytest.fixture
def server():
    fake = FakeCairn().start()
    yield fake
    fake.stop()


@pytest.fixture
def logged_in(server, cairn_env):
    """A config file as `cairn login` leaves it, with `vision` as the default project."""
    cairn_env.parent.mkdir(parents=True, exist_ok=True)
    cairn_env.write_text(json.dumps({"url": server.url, "token": TOKEN, "username": "alice",
                                     "project": "vision"}))
    cairn_env.chmod(0o600)
    return server


@pytest.fixture
def refused_url():
    """A URL on which nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def run(capsys, monkeypatch):
    def invoke(*argv: str, stdin: str | None = None) -> Result:
        if stdin is not None:
            monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        capsys.readouterr()
        code = cli.main(list(argv))
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return invoke
