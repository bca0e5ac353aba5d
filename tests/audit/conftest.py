from html.parser import HTMLParser

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from apps.audit.models import AuditEvent

PASSWORD = "pw-for-tests-123"  # tests.factories.UserFactory's
IP = "203.0.113.7"
AGENT = "cairn-tests/1.0"


@pytest.fixture(autouse=True)
def _fresh_throttle():
    cache.clear()  # the sign-in throttle counts in the default cache
    yield
    cache.clear()


@pytest.fixture
def from_ip():
    """from_ip(user=None) -> an APIClient whose requests come from IP with user agent AGENT."""

    def make(user=None):
        client = APIClient(REMOTE_ADDR=IP, HTTP_USER_AGENT=AGENT)
        if user is not None:
            client.force_authenticate(user=user)
        return client

    return make


def records(**filters) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(**filters).order_by("id"))


class _FormFields(HTMLParser):
    """The fields a browser would submit from the page's forms (checked boxes, selected options)."""

    def __init__(self):
        super().__init__()
        self.data: list[tuple[str, str]] = []
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        name = a.get("name")
        if tag == "input" and name and a.get("type") not in ("submit", "button", "file"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            self.data.append((name, a.get("value") or ("on" if a.get("type") == "checkbox" else "")))
        elif tag == "select" and name:
            self._select = name
        elif tag == "option" and self._select and "selected" in a:
            self.data.append((self._select, a.get("value") or ""))
        elif tag == "textarea" and name:
            self._textarea = name
            self.data.append((name, ""))

    def handle_data(self, data):
        if self._textarea:
            self.data[-1] = (self._textarea, self.data[-1][1] + data)

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None


def admin_form(client, url: str) -> dict:
    """GET an admin change page and return what saving it unchanged would POST (lists for repeats)."""
    parser = _FormFields()
    parser.feed(client.get(url).content.decode())
    data: dict = {}
    for name, value in parser.data:
        data.setdefault(name, []).append(value)
    data.pop("csrfmiddlewaretoken", None)
    return {name: values if len(values) > 1 else values[0] for name, values in data.items()}
