"""Issue 44, found 1: a replica replaced its bridge socket with a link to a root-only socket, and
Cairn's gateway (root) relayed requests to it; the readiness probe followed the link too.

Now Cairn binds the socket itself in a folder of its own that is not mounted into the sandbox (the
replica gets the listening descriptor only), and the gateway and the probe connect only to a socket
that is not a link, is a socket, and is Cairn's, in a folder nobody else may write."""
import os
import socket
import tempfile
import threading

import httpx
import pytest

from apps.backends.local import sandbox
from apps.backends.local.paths import workload_dir
from apps.backends.local.reconciler import reconcile_once
from apps.backends.services import workload_dispatch
from apps.deployments.readiness import probe
from apps.workloads.choices import WorkloadStatus
from tests.backends.helpers import admitted, wait_for
from tests.deployments.test_gateway import APP, _bearer, _url, ready
from tests.factories import make_token

S = WorkloadStatus

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(sandbox.isolation().level not in (sandbox.BWRAP, sandbox.BWRAP_ROOT),
                       reason="bubblewrap is not usable on this host"),
]

# Before it serves, the replica tries what the tester's did: replace every socket it can find in
# its bridge's folder with a link to the root-only socket, and says how it went.
ATTACK = """
    import glob, os
    replaced = []
    for path in glob.glob(os.environ["SOCKETS"]):
        try:
            os.unlink(path)
            os.symlink(os.environ["ROOT_SOCKET"], path)
            replaced.append(path)
        except OSError as exc:
            print("attack refused:", exc, flush=True)
    print("attack:", "replaced" if replaced else "nothing to replace", flush=True)
""" + APP


class RootOnlyServer:
    """An HTTP server on a unix socket, 0600 in a 0700 folder of root's (like containerd's), that
    counts the connections it gets."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="root-only-")
        os.chmod(self.folder, 0o700)
        self.path = os.path.join(self.folder, "private.sock")
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(self.path)
        os.chmod(self.path, 0o600)
        self.listener.listen(16)
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\nConnection: close\r\n\r\nroot secret")
            conn.close()

    def close(self):
        self.listener.close()
        os.unlink(self.path)
        os.rmdir(self.folder)


@pytest.fixture
def root_only():
    server = RootOnlyServer()
    yield server
    server.close()


def _deploy_attacker(project, script, root_only):
    workload = admitted(kind="deployment", project=project, name="model",
                        spec={"command": ["python", script(ATTACK)], "port": 8000, "env": {}})
    workload.spec["env"] = {"ROOT_SOCKET": root_only.path,
                            "SOCKETS": str(workload_dir(workload.pk) / "attempt-*" / "sock-*" / "*.sock")}
    workload.save(update_fields=["spec"])
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.RUNNING
    return workload


def test_a_replica_cannot_reach_its_socket_and_the_gateway_serves_it(gateway_server, project, alice, script,
                                                                     root_only):
    from apps.backends.selectors import workload_log_read

    workload = _deploy_attacker(project, script, root_only)
    wait_for(lambda: "listening on" in workload_log_read(workload=workload, replica=0), what="the replica to listen")
    log = workload_log_read(workload=workload, replica=0)
    assert "attack: nothing to replace" in log, log  # the folder is not even in its sandbox
    path = workload.runtime["replicas"][0]["socket"]
    info, folder = os.lstat(path), os.lstat(os.path.dirname(path))
    assert (info.st_uid, folder.st_uid) == (os.geteuid(), os.geteuid())  # Cairn's, not the run user's
    assert folder.st_mode & 0o777 == 0o700 and info.st_mode & 0o777 == 0o600
    ready(workload, 1)
    answer = httpx.get(_url(gateway_server), headers=_bearer(make_token(alice)))
    assert answer.status_code == 200 and answer.json()["path"] == "/hello"
    assert root_only.connections == 0


def test_a_socket_replaced_by_a_link_gets_502_and_is_not_ready(gateway_server, project, alice, script, root_only,
                                                               settings):
    """However a link gets there, neither the gateway nor the probe follows it."""
    settings.CAIRN = {**settings.CAIRN, "SERVE_AUTH_CACHE_SECONDS": 0}
    workload = _deploy_attacker(project, script, root_only)
    workload = ready(workload, 1)
    path = workload.runtime["replicas"][0]["socket"]
    os.unlink(path)
    os.symlink(root_only.path, path)  # what the replica did before issue 44

    answer = httpx.get(_url(gateway_server), headers=_bearer(make_token(alice)))
    assert answer.status_code == 502, answer.text
    assert "not the one Cairn made" in answer.json()["detail"]
    assert not probe(socket=path)
    reconcile_once()
    workload.refresh_from_db()
    assert workload.runtime["replicas"][0].get("ready") is False
    assert root_only.connections == 0


def test_the_probe_refuses_a_socket_that_is_not_cairns(tmp_path, root_only):
    """A socket of another user, or one in a folder others may write, is not Cairn's."""
    folder = tmp_path / "sock-0"
    folder.mkdir(mode=0o700)
    path = str(folder / "serve-x.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(4)
    try:
        os.chmod(folder, 0o777)
        assert not probe(socket=path, timeout=1)  # anyone could have put it there
        os.chmod(folder, 0o700)
        if os.geteuid() == 0:
            os.chown(path, 65534, 65534)
            assert not probe(socket=path, timeout=1)  # someone else's socket
    finally:
        listener.close()
    os.unlink(path)
    os.symlink(root_only.path, path)
    assert not probe(socket=path, timeout=1)
    assert root_only.connections == 0
