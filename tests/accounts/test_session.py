"""Session sign-in for the dashboard: POST/GET/DELETE /api/v1/auth/session/, CSRF on every write."""
import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from tests.factories import UserFactory

URL = "/api/v1/auth/session/"
PASSWORD = "pw-for-tests-123"

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_throttle():
    cache.clear()  # the login throttle counts in the default cache
    yield
    cache.clear()


def _browser() -> tuple[APIClient, str]:
    """A client that enforces CSRF like a browser, with the csrftoken cookie the dashboard gets."""
    client = APIClient(enforce_csrf_checks=True)
    response = client.get(URL)
    assert response.status_code == 200
    return client, client.cookies["csrftoken"].value


def test_anonymous_session_state_sets_the_csrf_cookie():
    client, token = _browser()
    assert token
    assert client.get(URL).json() == {"authenticated": False, "user": None}


def test_sign_in_me_csrf_and_sign_out(alice, project):
    client, token = _browser()
    assert client.get("/api/v1/me/").status_code == 401

    response = client.post(URL, {"username": "alice", "password": PASSWORD}, format="json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["username"] == "alice" and body["projects"] == [{"slug": "vision", "name": "Vision", "role": "owner"}]
    assert "sessionid" in response.cookies
    assert client.get("/api/v1/me/").json() == body
    assert client.get(URL).json() == {"authenticated": True, "user": body}

    # Django rotated the CSRF token at sign-in; a write without the header is refused.
    new_token = client.cookies["csrftoken"].value
    assert new_token != token
    refused = client.post("/api/v1/tokens/", {"name": "laptop"}, format="json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    created = client.post("/api/v1/tokens/", {"name": "laptop"}, format="json", HTTP_X_CSRFTOKEN=new_token)
    assert created.status_code == 201

    refused = client.delete(URL)
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    assert client.delete(URL, HTTP_X_CSRFTOKEN=new_token).status_code == 204
    me = client.get("/api/v1/me/")
    assert me.status_code == 401 and me.json()["detail"]
    assert client.get(URL).json()["authenticated"] is False


def test_wrong_password_is_400(alice):
    client, token = _browser()
    response = client.post(URL, {"username": "alice", "password": "nope"}, format="json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 400
    assert response.json() == {"detail": "Wrong username or password."}
    unknown = client.post(URL, {"username": "nobody", "password": "x"}, format="json", HTTP_X_CSRFTOKEN=token)
    assert unknown.status_code == 400 and unknown.json() == {"detail": "Wrong username or password."}
    assert client.get("/api/v1/me/").status_code == 401


def test_inactive_user_cannot_sign_in():
    UserFactory(username="gone", is_active=False)
    client, token = _browser()
    response = client.post(URL, {"username": "gone", "password": PASSWORD}, format="json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 400 and response.json()["detail"] == "Wrong username or password."


def test_sign_in_needs_the_csrf_token(alice):
    client, _ = _browser()
    response = client.post(URL, {"username": "alice", "password": PASSWORD}, format="json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    forged = client.post(URL, {"username": "alice", "password": PASSWORD}, format="json",
                         HTTP_X_CSRFTOKEN="x" * 32)
    assert forged.status_code == 403
    assert client.get("/api/v1/me/").status_code == 401


@pytest.mark.parametrize("body", [{}, {"username": "alice"}, {"username": "alice", "password": PASSWORD, "extra": 1},
                                  {"username": ["alice"], "password": PASSWORD}])
def test_bad_bodies_are_400_with_detail(alice, body):
    client, token = _browser()
    response = client.post(URL, body, format="json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 400 and response.json()["detail"]


def test_malformed_json_is_400(alice):
    client, token = _browser()
    response = client.post(URL, "{not json", content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 400 and response.json()["detail"]


def test_sign_in_is_throttled(alice):
    from rest_framework.throttling import ScopedRateThrottle

    original = ScopedRateThrottle.THROTTLE_RATES
    ScopedRateThrottle.THROTTLE_RATES = {"login": "3/min"}
    try:
        client, token = _browser()
        codes = [client.post(URL, {"username": "alice", "password": "nope"}, format="json",
                             HTTP_X_CSRFTOKEN=token).status_code for _ in range(4)]
        assert codes == [400, 400, 400, 429]
        throttled = client.post(URL, {"username": "alice", "password": PASSWORD}, format="json",
                                HTTP_X_CSRFTOKEN=token)
        assert throttled.status_code == 429 and throttled.json()["detail"]
        assert client.get(URL).status_code == 200  # reading the state is not throttled
    finally:
        ScopedRateThrottle.THROTTLE_RATES = original


def test_sign_out_when_not_signed_in_is_204():
    client, token = _browser()
    assert client.delete(URL, HTTP_X_CSRFTOKEN=token).status_code == 204
