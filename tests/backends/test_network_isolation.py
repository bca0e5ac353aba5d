"""Every local workload has a network of its own (issue 44: a job on the host network reached
PostgreSQL on 127.0.0.1 and made its owner superuser, published on Redis, and wrote into another
project's TCPStore).

Real replicas, real namespaces. Each probe script inside a replica tries to connect to the
targets it is given and writes what happened as JSON. The "outside" is a network namespace made
here (veth, 203.0.113.2 public-looking and 10.213.0.2 private), never a real network.
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import textwrap
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from apps.backends.local import netns, sandbox, startup
from apps.backends.local.paths import home_dir, work_dir
from apps.backends.selectors import workload_log_read
from apps.backends.services import workload_dispatch
from apps.workloads.choices import WorkloadStatus
from tests.backends.helpers import admitted, reconcile_until, wait_for

S = WorkloadStatus
pytestmark = pytest.mark.django_db(transaction=True)

PUBLIC, PRIVATE, OUTSIDE_PORT = "203.0.113.2", "10.213.0.2", 8080


@pytest.fixture(autouse=True)
def _needs_namespaces():
    """Never skipped: a host that cannot do this is a failure to see, not to hide."""
    assert os.geteuid() == 0, "these tests need root (Cairn as root creates the namespaces)"
    iso = sandbox.isolation()
    assert iso.level == sandbox.BWRAP_ROOT, f"expected bubblewrap + run user, got {iso.level}: {iso.problem}"
    net = netns.network()
    assert net.available, f"network namespaces unavailable here: {net.problem}"
    assert net.outbound, "slirp4netns is missing (make sandbox)"
    yield
    netns.remove_all()


PROBE = r"""
import json, os, socket, sys, time
targets = json.loads(sys.argv[1])
out = {}
for name, (host, port) in targets.items():
    try:
        with socket.create_connection((host, int(port)), timeout=3) as s:
            s.settimeout(3)
            try:
                out[name] = "connected:" + s.recv(64).decode(errors="replace")
            except socket.timeout:
                out[name] = "connected"
    except Exception as exc:
        out[name] = type(exc).__name__ + ": " + str(exc)
path = sys.argv[2]
with open(path + ".tmp", "w") as f:
    json.dump(out, f)
os.replace(path + ".tmp", path)
print("PROBED " + json.dumps(out), flush=True)
"""


class HostServer:
    """A TCP server on the host (all addresses): a stand-in for PostgreSQL, Redis or Cairn."""

    def __init__(self):
        self.sock = socket.create_server(("0.0.0.0", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            try:
                conn.sendall(b"host-secret")
            finally:
                conn.close()

    def close(self):
        self.sock.close()


@pytest.fixture
def host_server():
    server = HostServer()
    yield server
    server.close()


def _run(*argv, check=True):
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=30)


@pytest.fixture
def outside():
    """A network namespace standing for the outside world: 203.0.113.2 (public-looking) and
    10.213.0.2 (private) each answer on OUTSIDE_PORT. Removed whatever happens."""
    tag = os.getpid() % 100000
    name, host_if, inner_if = f"cairn-test-outside-{tag}", f"cto{tag}", f"cti{tag}"
    server = None
    # One outside at a time on this host: the addresses are fixed, and pytest-xdist's workers (or
    # two runs) would otherwise route them to two namespaces at once.
    lock = open("/tmp/cairn-test-outside.lock", "w")  # noqa: SIM115 - held until the fixture ends
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        _run("ip", "netns", "add", name)
        _run("ip", "link", "add", host_if, "type", "veth", "peer", "name", inner_if)
        _run("ip", "link", "set", inner_if, "netns", name)
        _run("ip", "addr", "add", "203.0.113.1/24", "dev", host_if)
        _run("ip", "link", "set", host_if, "up")
        for argv in (("link", "set", "lo", "up"), ("link", "set", inner_if, "up"),
                     ("addr", "add", f"{PUBLIC}/24", "dev", inner_if), ("addr", "add", f"{PRIVATE}/32", "dev", inner_if),
                     ("route", "add", "default", "via", "203.0.113.1")):
            _run("ip", "-n", name, *argv)
        _run("ip", "route", "add", f"{PRIVATE}/32", "via", PUBLIC)
        # Both sockets listen before "serving" is printed: the checks below must not race the bind.
        serve = textwrap.dedent(f"""
            import socket, threading
            def serve(s, address):
                while True:
                    c, _ = s.accept(); c.sendall(b"outside " + address.encode()); c.close()
            listening = [(socket.create_server((a, {OUTSIDE_PORT})), a) for a in ("{PUBLIC}", "{PRIVATE}")]
            for s, a in listening:
                threading.Thread(target=serve, args=(s, a), daemon=True).start()
            print("serving", flush=True)
            threading.Event().wait()
        """)
        server = subprocess.Popen(["ip", "netns", "exec", name, "/usr/bin/python3", "-c", serve],
                                  stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "serving"
        # The host itself reaches both: what a workload may not is the namespace's doing.
        for address in (PUBLIC, PRIVATE):
            with socket.create_connection((address, OUTSIDE_PORT), timeout=3) as s:
                assert s.recv(64).startswith(b"outside")
        yield name
    finally:
        if server is not None:
            server.kill()
            server.wait()
        _run("ip", "route", "del", f"{PRIVATE}/32", check=False)
        _run("ip", "link", "del", host_if, check=False)
        _run("ip", "netns", "del", name, check=False)
        lock.close()  # releases the flock


def _probe_job(script, targets: dict, *, replicas: int = 1, rendezvous: bool = False, **fields):
    """A job whose replica 0 probes `targets`; with `rendezvous`, its ranks also meet on MASTER_PORT."""
    probe = script(PROBE)
    meet = script(RENDEZVOUS)
    command = f"python {probe} '{json.dumps(targets)}' $HOME/probe-$RANK.json"
    if rendezvous:
        command += f" && python {meet}"
    return admitted(replicas=replicas, spec={"command": command, "env": {}}, **fields)


RENDEZVOUS = """
    import os, socket, time
    rank, port = int(os.environ["RANK"]), int(os.environ["MASTER_PORT"])
    if rank == 0:
        server = socket.create_server((os.environ["MASTER_ADDR"], port))
        server.settimeout(30)
        conn, _ = server.accept()
        print("rank 0 met rank", conn.recv(8).decode(), flush=True)
    else:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection((os.environ["MASTER_ADDR"], port), timeout=1).sendall(b"1")
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        print("rank 1 joined", flush=True)
"""


def _result(workload, rank: int = 0) -> dict:
    path = home_dir(workload.pk) / f"probe-{rank}.json"
    wait_for(path.exists, timeout=60, what=f"probe of workload {workload.pk}")
    return json.loads(path.read_text())


def _service_ports() -> dict:
    """The real PostgreSQL and Redis of this test run (scripts/with-test-services.sh), if any."""
    found = {}
    for key in ("DATABASE_URL", "REDIS_URL"):
        url = urlsplit(os.environ.get(key, ""))
        if url.port and url.hostname:
            found[key] = [url.hostname, url.port]
    return found


def _host_address() -> str:
    """A non-loopback address of this host (a service on 0.0.0.0 answers there too)."""
    for address in netns.host_addresses():
        if ":" not in address and not address.startswith("127."):
            return address
    raise AssertionError("this host has no non-loopback IPv4 address")


def _refused(result: dict, *names) -> None:
    for name in names:
        assert not result[name].startswith("connected"), f"{name} was reachable: {result}"


def test_job_ranks_meet_but_reach_nothing_on_the_host(script, host_server):
    """The ranks of one job rendezvous on 127.0.0.1:MASTER_PORT in their namespace; the host's
    loopback (a stand-in server, the real PostgreSQL and Redis), the host's own address, and
    another workload's rank port are out of reach."""
    other = admitted(replicas=1, spec={"command": f"python {script(LISTEN)}", "env": {}})
    workload_dispatch(workload_id=other.pk)
    other.refresh_from_db()
    assert other.status == S.RUNNING
    other_port = other.runtime["master_port"]
    # It does listen: seen from inside its own namespace.
    wait_for(lambda: _reach_inside(other, other_port), timeout=30, what="the other workload to listen")

    targets = {"host_loopback": ["127.0.0.1", host_server.port], "host_address": [_host_address(), host_server.port],
               "other_workload": ["127.0.0.1", other_port], **_service_ports()}
    workload = _probe_job(script, targets, replicas=2, rendezvous=True)
    workload_dispatch(workload_id=workload.pk)
    reconcile_until(workload, S.SUCCEEDED, timeout=60)
    result = _result(workload)
    _refused(result, *targets)
    assert host_server.accepted == 0
    assert "rank 0 met rank 1" in workload_log_read(workload=workload, replica=0)
    assert "rank 1 joined" in workload_log_read(workload=workload, replica=1)
    # The job's namespace is gone with its last replica.
    assert not os.path.exists(netns.path_of(netns.name_for(workload.pk, 1)))


LISTEN = """
    import os, socket, time
    server = socket.create_server(("0.0.0.0", int(os.environ["MASTER_PORT"])))
    print("listening", flush=True)
    while True:
        conn, _ = server.accept()
        conn.sendall(b"other-workload")
        conn.close()
"""


def _reach_inside(workload, port: int) -> bool:
    path = netns.path_of(netns.name_for(workload.pk, workload.attempt))
    done = subprocess.run(["nsenter", f"--net={path}", "--", "/usr/bin/python3", "-c",
                           f"import socket; print(socket.create_connection(('127.0.0.1', {port}), timeout=2).recv(64))"],
                          capture_output=True, text=True, timeout=10)
    return "other-workload" in done.stdout


def test_outbound_reaches_public_addresses_only(script, outside, pool):
    workload = _probe_job(script, {"public": [PUBLIC, OUTSIDE_PORT], "private": [PRIVATE, OUTSIDE_PORT],
                                   "metadata": ["169.254.169.254", 80], "slirp_gateway": ["10.0.2.2", 22]}, pool=pool)
    assert pool.outbound_access is True  # the default
    workload_dispatch(workload_id=workload.pk)
    reconcile_until(workload, S.SUCCEEDED, timeout=60)
    result = _result(workload)
    assert result["public"] == f"connected:outside {PUBLIC}", result
    _refused(result, "private", "metadata", "slirp_gateway")


def test_outbound_off_reaches_neither(script, outside, pool):
    pool.outbound_access = False
    pool.save(update_fields=["outbound_access"])
    workload = _probe_job(script, {"public": [PUBLIC, OUTSIDE_PORT], "private": [PRIVATE, OUTSIDE_PORT]}, pool=pool)
    workload_dispatch(workload_id=workload.pk)
    reconcile_until(workload, S.SUCCEEDED, timeout=60)
    _refused(_result(workload), "public", "private")


def test_torch_gloo_ddp_rendezvous_in_the_namespace(script):
    """Two ranks of a real torch.distributed (gloo) job meet over MASTER_ADDR in their namespace."""
    pytest.importorskip("torch", reason="torch is not installed in this venv (make venv)")
    ddp = script("""
        import datetime, torch, torch.distributed as dist
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
        t = torch.tensor([dist.get_rank() + 1.0])
        dist.all_reduce(t)
        print("all_reduce", int(t.item()), "of", dist.get_world_size(), flush=True)
        dist.destroy_process_group()
    """)
    workload = admitted(replicas=2, memory_mb=4096, spec={"command": ["python", ddp], "env": {}})
    workload_dispatch(workload_id=workload.pk)
    reconcile_until(workload, S.SUCCEEDED, timeout=120)
    assert "all_reduce 3 of 2" in workload_log_read(workload=workload, replica=0)


def _served(workload) -> None:
    """The deployment still serves through its bridge (the gateway's way in)."""
    import httpx

    path = workload.runtime["replicas"][0]["socket"]
    folder = os.open(os.path.dirname(path), os.O_PATH)
    try:
        uds = f"/proc/self/fd/{folder}/{os.path.basename(path)}"

        def get():
            try:
                with httpx.Client(transport=httpx.HTTPTransport(uds=uds), timeout=5) as client:
                    return client.get("http://replica/").status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(get, timeout=30, what="the deployment to serve over its socket")
    finally:
        os.close(folder)


def test_deployment_reaches_nothing_on_the_host_and_still_serves(script, host_server):
    targets = {"host_loopback": ["127.0.0.1", host_server.port], "host_address": [_host_address(), host_server.port],
               **_service_ports()}
    command = (f"python {script(PROBE)} '{json.dumps(targets)}' $HOME/probe-0.json && "
               "exec python -m http.server $PORT --bind 127.0.0.1")
    workload = admitted(kind="deployment", replicas=1, spec={"command": command, "port": 8000, "env": {}})
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.RUNNING
    _refused(_result(workload), *targets)
    _served(workload)
    assert host_server.accepted == 0


def test_notebook_reaches_nothing_on_the_host_and_still_answers(host_server, tmp_path):
    """A kernel's code (an IPython start-up file, run when the kernel starts) cannot reach the
    host; JupyterLab still answers on its URL, through Cairn's listener on the host."""
    import urllib.request

    targets = {"host_loopback": ["127.0.0.1", host_server.port], "host_address": [_host_address(), host_server.port],
               **_service_ports()}
    workload = admitted(kind="notebook", spec={"env": {}}, cpu_milli=1000)
    home = home_dir(workload.pk)
    startup = home / ".ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-probe.py").write_text(
        "import subprocess, sys, os\n"
        f"subprocess.run([sys.executable, '-c', {PROBE!r}, {json.dumps(targets)!r}, os.path.expanduser('~/probe-0.json')])\n")
    iso = sandbox.isolation()
    for root, _dirs, files in os.walk(home):
        for entry in [root, *(os.path.join(root, f) for f in files)]:
            os.chown(entry, iso.uid, iso.gid)
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == S.RUNNING
    url = workload.runtime["url"] + f"nb/{workload.project.slug}/{workload.pk}/"
    headers = {"Authorization": f"token {_token(workload)}", "Content-Type": "application/json"}

    def status():
        try:
            with urllib.request.urlopen(urllib.request.Request(url + "api/status", headers=headers), timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    wait_for(status, timeout=90, interval=0.25, what="JupyterLab to answer")
    request = urllib.request.Request(url + "api/kernels", data=b"{}", headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 201
    _refused(_result(workload), *targets)
    assert host_server.accepted == 0


def _token(workload) -> str:
    try:  # sealed at rest (issue 44, item 7)
        from apps.notebooks.access import runtime_token
    except ImportError:
        return workload.runtime["token"]
    return runtime_token(workload)


def test_namespaces_of_a_dead_cairn_are_swept(script):
    """A namespace whose replicas are gone (Cairn crashed before removing it) is removed by the
    next sweep; its keeper (and slirp4netns) with it."""
    workload = admitted(replicas=1, spec={"command": "true", "env": {}})
    workload_dispatch(workload_id=workload.pk)
    path = netns.path_of(netns.name_for(workload.pk, 1))
    assert os.path.exists(path)
    state = json.loads((work_dir(workload.pk).parent / "attempt-1" / "netns.json").read_text())
    wait_for(lambda: not any(p.is_file() and _alive(json.loads(p.read_text()))
                             for p in (work_dir(workload.pk).parent / "attempt-1").glob("replica-*.json")),
             timeout=30, what="the replica to end")
    # Asked for again since its replicas started: a replica is being started, it stays.
    os.utime(work_dir(workload.pk).parent / "attempt-1" / "netns.json")
    assert netns.sweep(force=True) == 0 and os.path.exists(path)
    old = time.time() - 3600
    os.utime(work_dir(workload.pk).parent / "attempt-1" / "netns.json", (old, old))
    assert netns.sweep(force=True) == 1
    assert not os.path.exists(path)
    wait_for(lambda: not _alive(state), timeout=10, what="the keeper to end")


def _alive(record: dict) -> bool:
    try:
        os.kill(int(record["pid"]), 0)
    except (OSError, KeyError, TypeError, ValueError):
        return False
    return Path(f"/proc/{record['pid']}").exists()


# -- where namespaces cannot be made, it is said: log, `make run`, the Cluster page ------------------

@pytest.fixture
def not_root(monkeypatch):
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    netns.network.cache_clear()
    yield
    netns.network.cache_clear()


def test_without_root_the_log_says_workloads_share_the_host_network(not_root, caplog):
    """The server's log at start-up (and `make run`, which prints the same describe())."""
    import logging

    net = netns.network()
    assert not net.available and netns.label() == netns.HOST
    assert "workloads share the host's network (Cairn is not root" in net.describe()
    with caplog.at_level(logging.INFO, logger="apps.backends.local.sandbox"):
        startup.log_start_up_warning()
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and "share the host's network" in r.getMessage()]
    assert warned, caplog.text


def test_the_cluster_page_gets_the_network_label(alice, client_for, not_root):
    from apps.clusters.choices import NETWORK_LABEL
    from apps.clusters.services import local_cluster_register

    node = local_cluster_register(isolation="bubblewrap", network=netns.label())
    assert node.labels[NETWORK_LABEL] == "host"
    body = client_for(alice).get("/api/v1/cluster/overview/").json()
    rows = [n for p in body["pools"] for n in p["nodes"]] + body["unpooled_nodes"]
    assert [n["replica_network"] for n in rows if n["name"] == node.name] == ["host"]
    node = local_cluster_register(isolation="bubblewrap+user", network="own")
    assert node.labels[NETWORK_LABEL] == "own"


def test_outbound_access_is_shown_in_the_pools_api_and_toggled_in_the_admin(client_for, alice, admin_user, pool):
    body = client_for(alice).get(f"/api/v1/pools/{pool.pk}/").json()
    assert body["outbound_access"] is True
    from django.test import Client

    client = Client()
    client.force_login(admin_user)
    listing = client.get("/admin/clusters/resourcepool/")
    assert listing.status_code == 200 and b"outbound_access" in listing.content
    change = client.get(f"/admin/clusters/resourcepool/{pool.pk}/change/")
    assert change.status_code == 200 and b'name="outbound_access"' in change.content
