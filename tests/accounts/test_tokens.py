from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.models import ApiToken
from tests.factories import make_token


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_created_token_is_shown_once_and_stored_hashed(alice, client_for):
    response = client_for(alice).post("/api/v1/tokens/", {"name": "ci", "scopes": ["read"]}, format="json")
    assert response.status_code == 201
    secret = response.json()["token"]
    assert secret.startswith("cairn_")
    stored = ApiToken.objects.get()
    assert secret.split("_", 2)[2] not in (stored.secret_hash, stored.prefix)
    assert stored.secret_hash == ApiToken.hash_secret(secret.split("_", 2)[2])
    assert stored.expires_at is not None  # expiring by default
    listing = client_for(alice).get("/api/v1/tokens/").json()["results"]
    assert "token" not in listing[0] and listing[0]["scopes"] == ["read"]
    assert bearer(secret).get("/api/v1/me/").json()["username"] == "alice"


def test_login_issues_a_working_token(alice, quota):
    response = APIClient().post("/api/v1/auth/login/", {"username": "alice", "password": "pw-for-tests-123"},
                                format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["user"]["projects"] == [{"slug": "vision", "name": "Vision", "role": "owner"}]
    assert bearer(body["token"]).get("/api/v1/projects/vision/training-jobs/").status_code == 200


def test_login_with_a_wrong_password_is_401(alice):
    response = APIClient().post("/api/v1/auth/login/", {"username": "alice", "password": "nope"}, format="json")
    assert response.status_code == 401 and response.json()["detail"] == "Wrong username or password."
    assert not ApiToken.objects.exists()


@pytest.mark.parametrize("mutate, message", [
    (lambda t: setattr(t, "revoked_at", timezone.now()), "revoked"),
    (lambda t: setattr(t, "expires_at", timezone.now() - timedelta(seconds=1)), "expired"),
])
def test_revoked_and_expired_tokens_are_refused(alice, mutate, message):
    secret = make_token(alice)
    token = ApiToken.objects.get()
    mutate(token)
    token.save()
    response = bearer(secret).get("/api/v1/me/")
    assert response.status_code == 401 and message in response.json()["detail"]


@pytest.mark.parametrize("header", ["Bearer cairn_nope", "Bearer cairn_abc_wrongsecret", "Bearer a b",
                                    "Bearer notcairn"])
def test_malformed_or_unknown_tokens_are_401(alice, header):
    make_token(alice)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/me/")
    assert response.status_code == 401 and response.json()["detail"]


def test_wrong_secret_for_a_real_prefix_is_401(alice):
    secret = make_token(alice)
    forged = secret[:-4] + ("AAAA" if not secret.endswith("AAAA") else "BBBB")
    assert bearer(forged).get("/api/v1/me/").status_code == 401


def test_revoke_is_own_tokens_only(alice, bob, client_for):
    make_token(bob)
    bobs = ApiToken.objects.get()
    assert client_for(alice).delete(f"/api/v1/tokens/{bobs.pk}/").status_code == 404
    assert client_for(bob).delete(f"/api/v1/tokens/{bobs.pk}/").status_code == 204
    assert client_for(bob).delete(f"/api/v1/tokens/{bobs.pk}/").status_code == 409
    bobs.refresh_from_db()
    assert bobs.revoked_at is not None


def test_session_auth_works_for_the_browser(alice, quota):
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="alice", password="pw-for-tests-123")
    assert client.get("/api/v1/projects/vision/workloads/").status_code == 200
    # unsafe requests from a session need the CSRF token
    assert client.post("/api/v1/projects/vision/training-jobs/", {"command": "true"}, format="json").status_code == 403
