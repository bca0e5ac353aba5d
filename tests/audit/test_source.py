"""From where: REMOTE_ADDR, X-Forwarded-For only from the proxies CAIRN_FORWARDED_ALLOW_IPS names,
user agent truncated."""
import pytest

from apps.audit.context import client_ip, user_agent
from apps.audit.models import AuditEvent


@pytest.fixture
def request_from(rf):
    def make(remote="10.0.0.5", forwarded=None, agent=""):
        meta = {"REMOTE_ADDR": remote, "HTTP_USER_AGENT": agent}
        if forwarded is not None:
            meta["HTTP_X_FORWARDED_FOR"] = forwarded
        return rf.get("/", **meta)

    return make


def test_forwarded_for_is_ignored_unless_proxies_are_trusted(request_from, settings):
    settings.CAIRN = {**settings.CAIRN, "TRUSTED_PROXIES": 0, "FORWARDED_ALLOW_IPS": []}
    assert client_ip(request_from(forwarded="198.51.100.1")) == "10.0.0.5"
    # TRUSTED_PROXIES alone does not make any peer a proxy: only FORWARDED_ALLOW_IPS does.
    settings.CAIRN = {**settings.CAIRN, "TRUSTED_PROXIES": 1, "FORWARDED_ALLOW_IPS": ["10.0.0.6", "192.168.0.0/16"]}
    assert client_ip(request_from(forwarded="198.51.100.1")) == "10.0.0.5"
    assert client_ip(request_from(remote="127.0.0.1", forwarded="198.51.100.1")) == "127.0.0.1"


@pytest.mark.parametrize("allowed, remote, forwarded, expected", [
    (["10.0.0.5"], "10.0.0.5", "198.51.100.1", "198.51.100.1"),
    (["10.0.0.0/24"], "10.0.0.5", "6.6.6.6, 198.51.100.1", "198.51.100.1"),
    (["10.0.0.0/24"], "10.0.0.5", "6.6.6.6, 198.51.100.1, 10.0.0.9", "198.51.100.1"),  # two trusted hops
    (["10.0.0.0/24"], "10.0.0.5", "10.0.0.8, 10.0.0.9", "10.0.0.8"),  # only proxies: the first
    (["10.0.0.0/24"], "10.0.0.5", "junk", "10.0.0.5"),
    (["10.0.0.0/24"], "10.0.0.5", "", "10.0.0.5"),
    (["*"], "203.0.113.9", "198.51.100.1", "198.51.100.1"),
    (["::1"], "::1", "2001:db8::1", "2001:db8::1"),
])
def test_forwarded_for_from_allowed_proxies(request_from, settings, allowed, remote, forwarded, expected):
    settings.CAIRN = {**settings.CAIRN, "TRUSTED_PROXIES": 0, "FORWARDED_ALLOW_IPS": allowed}
    assert client_ip(request_from(remote=remote, forwarded=forwarded)) == expected


@pytest.mark.parametrize("proxies, forwarded, expected", [
    (1, "198.51.100.1", "198.51.100.1"),
    (1, "6.6.6.6, 198.51.100.1", "198.51.100.1"),  # the client's own claim (left) is not believed
    (2, "6.6.6.6, 198.51.100.1, 10.0.0.9", "198.51.100.1"),
    (2, "198.51.100.1", "10.0.0.5"),  # fewer hops than proxies: not through them, use the peer
    (1, "not-an-ip", "10.0.0.5"),
    (1, "2001:db8::1", "2001:db8::1"),
])
def test_trusted_proxies_take_the_address_they_saw(request_from, settings, proxies, forwarded, expected):
    settings.CAIRN = {**settings.CAIRN, "TRUSTED_PROXIES": proxies, "FORWARDED_ALLOW_IPS": ["10.0.0.5"]}
    assert client_ip(request_from(forwarded=forwarded)) == expected


def test_user_agent_is_truncated(request_from):
    assert len(user_agent(request_from(agent="x" * 5000))) == AuditEvent._meta.get_field("user_agent").max_length


@pytest.mark.django_db
def test_sign_in_behind_a_trusted_proxy_records_the_client(alice, settings, client):
    settings.CAIRN = {**settings.CAIRN, "TRUSTED_PROXIES": 1, "FORWARDED_ALLOW_IPS": ["10.0.0.5"]}
    client.post("/api/v1/auth/login/", {"username": "alice", "password": "wrong", "token_name": "x"},
                content_type="application/json", REMOTE_ADDR="10.0.0.5", HTTP_X_FORWARDED_FOR="198.51.100.1")
    assert AuditEvent.objects.get(action="auth.login_failed").source_ip == "198.51.100.1"
