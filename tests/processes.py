"""Start real Cairn processes (manage.py commands, Celery workers) against the test database."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


def test_database_url() -> str:
    db = settings.DATABASES["default"]
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


def cairn_env(**extra: str) -> dict[str, str]:
    """Environment for a child process that must see the test database and data directory."""
    env = dict(os.environ)
    env.update({
        "DATABASE_URL": test_database_url(),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "CAIRN_DATA_DIR": str(settings.CAIRN_DATA_DIR),
        "PYTHONUNBUFFERED": "1",
    })
    env.update(extra)
    return env


class Process:
    def __init__(self, args: list[str], env: dict[str, str], log: Path):
        self.log_path = log
        self._log = open(log, "ab")
        self.popen = subprocess.Popen(args, env=env, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT,
                                      start_new_session=True)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)
        self._log.close()


def manage(*args: str, env: dict[str, str], log: Path) -> Process:
    return Process([sys.executable, "manage.py", *args], env, log)


def celery_worker(env: dict[str, str], log: Path) -> Process:
    return Process([sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "cairn", "--pool", "solo",
                    "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info"], env, log)


def wait_for(predicate, timeout: float = 30, interval: float = 0.2, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


def free_port() -> int:
    """A TCP port on the loopback that nothing listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_ok(url: str) -> bool:
    import requests

    try:
        return requests.get(url, timeout=1).status_code == 200
    except requests.RequestException:
        return False


class EmbeddedServer:
    """`manage.py run_embedded` (web, websockets, scheduler, reconciler, in-process tasks) on a free
    loopback port, against the test database. `url` is its base URL; `stop()` ends it (SIGINT, so it
    stops the replica processes it started)."""

    def __init__(self, env: dict[str, str], log: Path, port: int | None = None, timeout: float = 60):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {"CAIRN_PUBLIC_URL": self.url, **env}
        self.process = manage("run_embedded", "--no-demo", "--port", str(self.port), env=env, log=log)
        try:
            wait_for(lambda: self.process.popen.poll() is not None or http_ok(f"{self.url}/healthz"),
                     timeout=timeout, message=f"the server on {self.url} to answer")
            if self.process.popen.poll() is not None:
                raise AssertionError(f"the server exited with {self.process.popen.returncode}:\n{self.process.output()}")
        except BaseException:
            self.process.stop(signal.SIGINT)
            raise

    def stop(self) -> None:
        self.process.stop(signal.SIGINT)
