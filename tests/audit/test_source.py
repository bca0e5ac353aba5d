"""From where: REMOTE_ADDR, X-Forwarded-For only behind trusted proxies, user agent truncated."""
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
    settings.CAIRN = {**settings.CAIRN, "TRUSTED_PROXIES": 0}
    assert client_ip(request_from(forwarded="198.51.100.1")) == "10.0.0.5"


@pytest.mark.parametrize("proxies, forwarded, expected", [
    (1, "198.51.100.1", "198.51.100.1"),
    (1, "6.6.6.6, 198.51.100.1", "198.51.100.1"),  # the client's own claim (left) is not believed
    (2, "6.6.6.6, 198.51.100.1, 10.0.0.9", "198.51.100.1"),
    (2, "198.51.100.1", "10.0.0.5"),  # fewer hops than proxies: not through them, use the peer
    (1, "not-an-ip", "10.0.0.5"),
    (1, "2001:db8::1", "2001:db8::1"),
])
def test_trusted_proxies_take_the_address_they_saw(request_from, settings, proxies, forwarded, expected):
    settings.CAIRN = {**settings.CAIRN, "TRUSTED_PROXIES": proxies}
    assert client_ip(request_from(forwarded=forwarded)) == expected


def test_user_agent_is_truncated(request_from):
    assert len(user_agent(request_from(agent="x" * 5000))) == AuditEvent._meta.get_field("user_agent").max_length


@pytest.mark.django_db
def test_sign_in_behind_a_trusted_proxy_records_the_client(alice, settings, client):
    settings.CAIRN = {**settings.CAIRN, "TRUSTED_PROXIES": 1}
    client.post("/api/v1/auth/login/", {"username": "alice", "password": "wrong", "token_name": "x"},
                content_type="application/json", REMOTE_ADDR="10.0.0.5", HTTP_X_FORWARDED_FOR="198.51.100.1")
    assert AuditEvent.objects.get(action="auth.login_failed").source_ip == "198.51.100.1"
