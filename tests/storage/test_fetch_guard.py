"""SSRF (issue 44, item 4): an S3 dataset's endpoint_url may not lead Cairn's server to a loopback,
private, link-local or metadata address unless an admin allows the host (on the pool, or for
every pool), and a failed fetch never shows what the endpoint answered."""
import http.server
import socket
import threading

import pytest
from django.core.exceptions import ValidationError

from apps.core import netguard
from apps.storage.models import Dataset
from tests.s3emu import CREDENTIALS, s3_location

pytestmark = pytest.mark.django_db

P = "/api/v1/projects/vision"
SECRET = "SECRET-METADATA-CREDENTIAL-1234"


class _Answer(http.server.BaseHTTPRequestHandler):
    status, headers, body = 200, {}, SECRET.encode()

    def do_GET(self):  # noqa: N802 - http.server's name
        self.server.hits.append(self.path)
        self.send_response(self.status)
        for name, value in {**self.headers_out, "Content-Length": str(len(self.body))}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(self.body)

    do_HEAD = do_GET

    def log_message(self, *args):
        pass


def _serve(status=200, headers=None, body=SECRET.encode(), host="127.0.0.1", family=socket.AF_INET):
    handler = type("Handler", (_Answer,), {"status": status, "headers_out": headers or {}, "body": body})
    server_class = type("Server", (http.server.ThreadingHTTPServer,), {"address_family": family})
    server = server_class((host, 0), handler)
    server.hits = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def secret_server():
    """A service on loopback that answers anything with a credential (like a metadata service)."""
    server = _serve()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def no_global_allowance(settings):
    settings.CAIRN = {**settings.CAIRN, "FETCH_ALLOWED_HOSTS": []}


def _register(client, endpoint, name="d", pool=None):
    body = {"name": name, "source": "s3", "credentials": CREDENTIALS,
            "location": {"bucket": "corpus", "prefix": "", "endpoint_url": endpoint}}
    if pool:
        body["pool"] = pool
    return client.post(f"{P}/datasets/", body, format="json")


def _refused(answer, *words):
    assert answer.status_code == 400, answer.content
    detail = answer.json()["detail"]
    assert SECRET not in answer.content.decode()
    for word in words:
        assert word in detail, detail
    assert not Dataset.objects.filter(name="d").exists()
    return detail


@pytest.fixture
def ipv6_secret_server():
    try:
        server = _serve(host="::1", family=socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 loopback on this host")
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("endpoint, words", [
    ("http://127.0.0.1:{port}", "loopback"),
    ("http://localhost:{port}", "loopback"),
    ("http://169.254.169.254", "metadata"),
    ("http://10.0.0.1:9000", "private"),
    ("http://100.64.0.1", "private"),
    ("http://0.0.0.0:{port}", "unspecified"),
    ("http://[::ffff:127.0.0.1]:{port}", "loopback"),
    ("http://[fd00:ec2::254]", "metadata"),
])
def test_private_endpoints_are_refused_without_a_connection(endpoint, words, client_for, alice, secret_server,
                                                             no_global_allowance):
    answer = _register(client_for(alice), endpoint.format(port=secret_server.server_address[1]))
    _refused(answer, "endpoint_url", words, "fetch_allowed_hosts")
    assert secret_server.hits == []


@pytest.mark.parametrize("region", ["x@127.0.0.1:8000/", "us-east-1.evil", "US_EAST"])
def test_the_region_cannot_steer_the_default_endpoint(region, client_for, alice, no_global_allowance):
    answer = client_for(alice).post(f"{P}/datasets/", {"name": "d", "source": "s3", "location": {
        "bucket": "corpus", "region": region}}, format="json")
    assert answer.status_code == 400 and "region" in answer.json()["detail"]


def test_ipv6_loopback_is_refused(client_for, alice, ipv6_secret_server, no_global_allowance):
    answer = _register(client_for(alice), f"http://[::1]:{ipv6_secret_server.server_address[1]}")
    _refused(answer, "loopback")
    assert ipv6_secret_server.hits == []


@pytest.fixture
def fake_dns(monkeypatch):
    """fake_dns(name, *addresses_per_lookup): `name` resolves to the next address each time it
    is looked up (the last one from then on); other names resolve as usual."""
    real = socket.getaddrinfo

    def install(name, *answers):
        answers = list(answers)

        def getaddrinfo(host, port, *args, **kwargs):
            if host == name:
                address = answers.pop(0) if len(answers) > 1 else answers[0]
                return real(address, port, *args, **kwargs)
            return real(host, port, *args, **kwargs)

        monkeypatch.setattr(netguard.socket, "getaddrinfo", getaddrinfo)

    return install


def test_a_name_resolving_to_loopback_is_refused(client_for, alice, secret_server, fake_dns, no_global_allowance):
    fake_dns("s3.internal.example", "127.0.0.1")
    answer = _register(client_for(alice), f"http://s3.internal.example:{secret_server.server_address[1]}")
    _refused(answer, "s3.internal.example", "loopback")
    assert secret_server.hits == []


def test_dns_rebinding_between_check_and_connect_is_refused(client_for, alice, secret_server, fake_dns,
                                                            no_global_allowance):
    """Public at the first look, loopback when the client connects: the guard connects only to the
    address it checked at connect time."""
    fake_dns("rebind.example", "93.184.216.34", "127.0.0.1")
    answer = _register(client_for(alice), f"http://rebind.example:{secret_server.server_address[1]}")
    _refused(answer, "loopback")
    assert secret_server.hits == []


def test_a_redirect_to_a_private_address_is_not_followed(client_for, alice, secret_server, settings):
    redirector = _serve(status=307, body=b"",
                        headers={"Location": f"http://127.0.0.1:{secret_server.server_address[1]}/corpus?list-type=2"})
    try:
        settings.CAIRN = {**settings.CAIRN, "FETCH_ALLOWED_HOSTS": [f"127.0.0.1:{redirector.server_address[1]}"]}
        answer = _register(client_for(alice), f"http://127.0.0.1:{redirector.server_address[1]}")
        _refused(answer)
        assert secret_server.hits == []
    finally:
        redirector.shutdown()
        redirector.server_close()


@pytest.mark.parametrize("status", [200, 403, 500])
def test_the_endpoints_answer_is_never_shown(status, client_for, alice, settings):
    """An allowed endpoint that answers something other than a listing: the detail says what
    failed (the status code), never the body."""
    server = _serve(status=status)
    try:
        settings.CAIRN = {**settings.CAIRN, "FETCH_ALLOWED_HOSTS": [f"127.0.0.1:{server.server_address[1]}"]}
        detail = _refused(_register(client_for(alice), f"http://127.0.0.1:{server.server_address[1]}"),
                          "could not be listed")
        assert server.hits  # it was reached: the host is allowed
        assert (f"HTTP {status}" in detail) if status != 200 else ("not an S3 listing" in detail), detail
    finally:
        server.shutdown()
        server.server_close()


def test_a_host_allowed_on_the_pool_works_for_projects_with_a_quota_there(client_for, alice, s3_server, pool,
                                                                           no_global_allowance):
    images = s3_server
    images.make_bucket("corpus")
    images.put("corpus", "images/a.bin", b"a" * 10)
    images.put("corpus", "images/b.bin", b"b" * 10)
    client = client_for(alice)
    location = s3_location(images, "corpus", "images")
    host = location["endpoint_url"].removeprefix("http://")
    _refused(_register(client, location["endpoint_url"], pool=pool.name), "loopback")  # not allowed yet
    pool.fetch_allowed_hosts = [host]
    pool.save()
    _refused(_register(client, location["endpoint_url"], pool=pool.name), "loopback")  # no quota on it
    assert not Dataset.objects.exists()

    from tests.factories import QuotaFactory

    QuotaFactory(project=alice.memberships.first().project, pool=pool)
    answer = client.post(f"{P}/datasets/", {"name": "imgs", "source": "s3", "location": location,
                                            "credentials": CREDENTIALS, "pool": pool.name}, format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["pool"] == pool.name and answer.json()["versions"][0]["files"] == 2
    images.put("corpus", "images/new.bin", b"n")
    snap = client.post(f"{P}/datasets/imgs/snapshot/")  # the pool's allowance again
    assert snap.status_code == 201, snap.content
    pool.fetch_allowed_hosts = []
    pool.save()
    refused = client.post(f"{P}/datasets/imgs/snapshot/")
    assert refused.status_code == 400 and "loopback" in refused.json()["detail"]


def test_the_pools_allowed_hosts_are_validated(pool):
    pool.fetch_allowed_hosts = ["s3.internal", "10.0.0.5:9000", "[fd00::5]:443", "fd00::6", "S3.Lab.Example"]
    pool.full_clean()
    for bad in (["http://s3.internal"], ["host:0"], ["host:99999"], ["a b"], [""], ["s3/x"], "s3.internal", [5],
                ["host:"], ["user@host"]):
        pool.fetch_allowed_hosts = bad
        with pytest.raises(ValidationError) as error:
            pool.full_clean()
        assert "fetch_allowed_hosts" in error.value.message_dict


def test_the_pool_admin_form_refuses_a_bad_entry(admin_user, pool):
    from django.test import Client

    client = Client()
    client.force_login(admin_user)
    url = f"/admin/clusters/resourcepool/{pool.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200
    from tests.audit.conftest import admin_form

    data = admin_form(client, url)
    data["fetch_allowed_hosts"] = '["http://bad/"]'
    answer = client.post(url, data)
    assert answer.status_code == 200 and b"host name, an IP address, or host:port" in answer.content
    pool.refresh_from_db()
    assert pool.fetch_allowed_hosts == []
    data["fetch_allowed_hosts"] = '["minio.lab:9000"]'
    assert client.post(url, data).status_code == 302
    pool.refresh_from_db()
    assert pool.fetch_allowed_hosts == ["minio.lab:9000"]


@pytest.mark.parametrize("address, refused", [
    ("8.8.8.8", False), ("2606:4700:4700::1111", False),
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("10.1.2.3", True), ("172.16.0.1", True),
    ("192.168.1.1", True), ("100.64.0.1", True), ("169.254.169.254", True), ("169.254.1.1", True),
    ("fe80::1", True), ("fc00::1", True), ("fd00:ec2::254", True), ("0.0.0.0", True), ("::", True),
    ("224.0.0.1", True), ("ff02::1", True), ("::ffff:10.0.0.1", True), ("::ffff:8.8.8.8", False),
])
def test_which_addresses_are_refused(address, refused):
    assert (netguard.refused_reason(address) is not None) is refused


def test_the_cache_fill_checks_the_endpoint_again_and_never_logs_its_answer(fake_dns):
    """cachefill.py (run on the node, without Cairn) applies the rule at fill time: the name may
    resolve elsewhere since registration."""
    from apps.storage import cachefill

    store = {"bucket": "b", "endpoint_url": "http://s3.lab.example:9000", "fetch_allowed_hosts": []}
    fake_dns("s3.lab.example", "93.184.216.34")
    cachefill.check_endpoint(store)  # public: fine
    fake_dns("s3.lab.example", "127.0.0.1")
    with pytest.raises(cachefill.FillError, match="loopback"):
        cachefill.check_endpoint(store)
    cachefill.check_endpoint({**store, "fetch_allowed_hosts": ["s3.lab.example:9000"]})
    with pytest.raises(cachefill.FillError):
        cachefill.check_endpoint({**store, "fetch_allowed_hosts": ["s3.lab.example:9001"]})
    for address in ("169.254.169.254", "10.0.0.1", "::1"):
        fake_dns("s3.lab.example", address)
        with pytest.raises(cachefill.FillError):
            cachefill.check_endpoint(store)
    answer = Exception(f"Server returned non-2xx status code: 403 Forbidden: {SECRET}\n\nDebug: status: 403")
    assert cachefill._failure(answer) == "the endpoint answered HTTP 403"
    assert SECRET not in cachefill._failure(RuntimeError(SECRET))


@pytest.fixture
def dataset_workload(client_for, alice, s3_server, pool, quota, settings):
    """A workload mounting an S3 dataset whose endpoint (the emulator's 127.0.0.1 address) the
    pool allows, and not the server-wide setting; returns (workload, the allowed host)."""
    from tests.factories import WorkloadFactory

    s3_server.make_bucket("corpus")
    s3_server.put("corpus", "images/a.bin", b"a")
    host = s3_server.url.removeprefix("http://")
    settings.CAIRN = {**settings.CAIRN, "FETCH_ALLOWED_HOSTS": []}
    pool.fetch_allowed_hosts = [host]
    pool.save()
    answer = client_for(alice).post(f"{P}/datasets/", {"name": "imgs", "source": "s3", "pool": pool.name,
                                                       "location": s3_location(s3_server, "corpus", "images")},
                                    format="json")
    assert answer.status_code == 201, answer.content
    workload = WorkloadFactory(project=quota.project, pool=pool, spec={"datasets": [{"name": "imgs", "version": 1}]})
    return workload, host


def test_a_workloads_datasets_carry_the_allowed_hosts(dataset_workload):
    from apps.storage.services import datasets_of

    workload, host = dataset_workload
    [item] = datasets_of(workload)
    assert item["store"]["fetch_allowed_hosts"] == [host]


def test_the_guard_tunnels_only_to_checked_destinations(secret_server):
    """CONNECT (what an https endpoint uses): a tunnel to an allowed destination carries bytes both
    ways; one to a refused destination gets 403 and no connection."""
    port = secret_server.server_address[1]

    def tunnel(guard, target):
        with socket.create_connection(("127.0.0.1", int(guard.proxy_url.rsplit(":", 1)[1])), timeout=5) as sock:
            sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            head = sock.recv(4096)
            if b" 200 " not in head.split(b"\r\n", 1)[0]:
                return head
            sock.sendall(b"GET /through HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
            return head + answer

    with netguard.FetchGuard(netguard.Policy([f"127.0.0.1:{port}"])) as guard:
        assert SECRET.encode() in tunnel(guard, f"127.0.0.1:{port}")
        assert guard.refusal is None
    with netguard.FetchGuard(netguard.Policy()) as guard:
        assert tunnel(guard, f"127.0.0.1:{port}").startswith(b"HTTP/1.1 403")
        assert "loopback" in guard.refusal
    assert secret_server.hits == ["/through"]


def test_the_local_cache_fill_job_carries_the_allowed_hosts(dataset_workload, tmp_path):
    """The local backend's fill job (read by cachefill.py on the node) has the rule's hosts too:
    without them cachefill cannot apply the rule at fill time."""
    import json

    from apps.backends.local.storage import fill_prefix

    workload, host = dataset_workload
    argv = fill_prefix(workload, directory=tmp_path, replica=0)
    [entry] = json.loads((tmp_path / "cache-fill-0.json").read_text())["entries"]
    assert argv[-1] == "--" and entry["store"]["fetch_allowed_hosts"] == [host]
