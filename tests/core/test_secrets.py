"""Secrets (issue 44, item 7): embedded mode makes its own SECRET_KEY and keeps it (0600); server
mode refuses the public default (system check cairn.E001, and the web server's start);
`check --deploy` warns when PostgreSQL or Redis let Cairn in without a password; credentials
encrypted with the default key stay readable and are re-encrypted with the real one."""
import json
import os
import socket
import stat
import subprocess
import sys
import time

import pytest

from apps.clusters import crypto
from apps.clusters.crypto import rotate_legacy
from apps.core.checks import redis_without_password
from config.secret_key import DEFAULT_SECRET_KEY, embedded_secret_key
from tests.processes import ROOT


def _run(args, **env_changes):
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DJANGO_SETTINGS_MODULE")}
    env.update({k: v for k, v in env_changes.items() if v is not None})
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


PRINT_KEY = ["manage.py", "shell", "-c", "from django.conf import settings; print('KEY=' + settings.SECRET_KEY)"]


def test_embedded_mode_makes_a_key_on_the_first_run_and_keeps_it(tmp_path):
    data = tmp_path / "data"
    first = _run(PRINT_KEY, CAIRN_MODE="embedded", CAIRN_DATA_DIR=str(data))
    assert first.returncode == 0, first.stderr
    key = first.stdout.split("KEY=", 1)[1].strip()
    assert key != DEFAULT_SECRET_KEY and len(key) >= 50
    path = data / "secret_key"
    assert path.read_text().strip() == key and stat.S_IMODE(path.stat().st_mode) == 0o600
    again = _run(PRINT_KEY, CAIRN_MODE="embedded", CAIRN_DATA_DIR=str(data))
    assert again.stdout.split("KEY=", 1)[1].strip() == key
    given = _run(PRINT_KEY, CAIRN_MODE="embedded", CAIRN_DATA_DIR=str(data), SECRET_KEY="from-the-environment-" * 3)
    assert given.stdout.split("KEY=", 1)[1].strip() == "from-the-environment-" * 3


def test_a_second_process_reads_the_first_ones_key(tmp_path):
    folder = tmp_path / "fresh"
    assert embedded_secret_key(folder) == embedded_secret_key(folder)
    assert [p.name for p in folder.iterdir()] == ["secret_key"]  # no temporary file left


def test_server_mode_refuses_the_default_key(tmp_path):
    refused = _run(["manage.py", "check"], CAIRN_MODE="server", CAIRN_DATA_DIR=str(tmp_path))
    assert refused.returncode != 0 and "cairn.E001" in refused.stderr and "SECRET_KEY" in refused.stderr
    assert not (tmp_path / "secret_key").exists()  # server mode never makes one
    web = _run(["-c", "import config.asgi"], CAIRN_MODE="server", CAIRN_DATA_DIR=str(tmp_path))
    assert web.returncode != 0 and "ImproperlyConfigured" in web.stderr and "SECRET_KEY" in web.stderr
    ok = _run(["manage.py", "check"], CAIRN_MODE="server", SECRET_KEY="a-real-key-" * 6)
    assert ok.returncode == 0, ok.stderr


def test_check_deploy_warns_about_postgresql_and_redis_without_passwords():
    """The test services are both open (trust authentication, no requirepass)."""
    if "postgres" not in os.environ.get("DATABASE_URL", "") or not os.environ.get("REDIS_URL"):
        pytest.skip("needs scripts/with-test-services.sh")
    result = _run(["manage.py", "check", "--deploy"], SECRET_KEY="a-real-key-" * 6)
    assert "cairn.W001" in result.stderr + result.stdout and "cairn.W002" in result.stderr + result.stdout
    assert "PostgreSQL" in result.stderr + result.stdout and "without a password" in result.stderr + result.stdout
    # uvicorn's default (no FORWARDED_ALLOW_IPS) believes 127.0.0.1; Cairn believes no one.
    assert "cairn.W003" in result.stderr + result.stdout
    same = _run(["manage.py", "check", "--deploy"], SECRET_KEY="a-real-key-" * 6, FORWARDED_ALLOW_IPS="")
    assert "cairn.W003" not in same.stderr + same.stdout


@pytest.fixture
def redis_with_password(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--requirepass", "s3cret", "--dir", str(tmp_path)], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    yield port
    proc.kill()
    proc.wait()


def test_redis_with_a_password_is_not_reported(redis_with_password, settings):
    port = redis_with_password
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"  # no password in the URL: Redis says NOAUTH
    assert redis_without_password() is None
    settings.REDIS_URL = f"redis://:s3cret@127.0.0.1:{port}/0"
    assert redis_without_password() is None
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing there
    assert redis_without_password() is None


@pytest.mark.django_db
def test_credentials_made_with_the_default_key_are_read_then_re_encrypted(settings, project):
    from apps.clusters.models import Cluster, ClusterCredential
    from apps.storage.models import Dataset

    settings.SECRET_KEY, settings.CAIRN_ENCRYPTION_KEY = DEFAULT_SECRET_KEY, ""
    old_kubeconfig, old_creds = crypto.encrypt("kubeconfig: old"), crypto.encrypt(json.dumps({"k": "v"}))
    cluster = Cluster.objects.create(name="k8s", backend="kubernetes")
    ClusterCredential.objects.create(cluster=cluster, source="kubeconfig", encrypted_kubeconfig=old_kubeconfig)
    Dataset.objects.create(project=project, name="d", source="s3", location={}, credentials_encrypted=old_creds)

    settings.SECRET_KEY = "this-installations-own-key-" * 3
    assert crypto.decrypt(old_kubeconfig) == "kubeconfig: old"  # still readable
    assert crypto.needs_rotation(old_kubeconfig)
    assert rotate_legacy() == 2 and rotate_legacy() == 0
    new = ClusterCredential.objects.get().encrypted_kubeconfig
    assert new != old_kubeconfig and not crypto.needs_rotation(new)
    assert crypto._derive(settings.SECRET_KEY).decrypt(new.encode()) == b"kubeconfig: old"  # the new key alone
    assert json.loads(crypto.decrypt(Dataset.objects.get().credentials_encrypted)) == {"k": "v"}
    other = crypto._derive("someone-elses-key").encrypt(b"x").decode()
    with pytest.raises(crypto.CredentialsUnreadable):
        crypto.decrypt(other)
