"""The live websocket's sign-in as a browser sees it (docs/live.md, "Authentication"), against a
live embedded Cairn in Debian's chromium: refusals arrive as close codes with reasons (not a
failed handshake), an API token works as a subprotocol, and signing out in another tab stops the
page's socket, whose indicator then says why."""
import re

import pytest
from playwright.sync_api import expect

from tests.e2e.test_dashboard import (  # noqa: F401  (cairn: the module's server fixture)
    OTHER_PROJECT,
    PROJECT,
    UI,
    cairn,
    sign_in,
    workloads_url,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db, pytest.mark.timeout(240)]

BROWSER_SOCKETS = """async ([url, otherUrl, token]) => {
  const closeOf = (ws) => new Promise((resolve) => {
    ws.onclose = (e) => resolve({ code: e.code, reason: e.reason });
  });
  const anonymous = await closeOf(new WebSocket(url));
  const badToken = await closeOf(new WebSocket(url, ["cairn.v1", "cairn.token.cairn_0123456789ab_nope"]));
  const inUrl = await closeOf(new WebSocket(url + "?token=" + token));
  const notMember = await closeOf(new WebSocket(otherUrl, ["cairn.v1", "cairn.token." + token]));
  const ws = new WebSocket(url, ["cairn.v1", "cairn.token." + token]);
  const protocol = await new Promise((resolve) => {
    ws.onopen = () => resolve(ws.protocol);
    ws.onclose = (e) => resolve("closed " + e.code);
  });
  const first = await new Promise((resolve) => {
    ws.onmessage = (e) => resolve(JSON.parse(e.data));
    ws.send(JSON.stringify({ action: "subscribe", topic: "workloads" }));
  });
  ws.close();
  return { anonymous, badToken, inUrl, notMember, protocol, first };
}"""


def test_a_browser_sees_close_codes_and_signs_in_with_a_subprotocol_token(cairn, new_page):  # noqa: F811
    page = new_page(cairn.url)
    page.goto("/signin")  # the site's own origin, not signed in
    ws_base = cairn.url.replace("http://", "ws://")
    seen = page.evaluate(BROWSER_SOCKETS, [f"{ws_base}/ws/projects/{PROJECT}/live/",
                                           f"{ws_base}/ws/projects/{OTHER_PROJECT}/live/", cairn.token("erin")])
    assert seen["anonymous"]["code"] == 4401 and "Not signed in" in seen["anonymous"]["reason"]
    assert seen["badToken"] == {"code": 4401, "reason": "Invalid API token."}
    assert seen["inUrl"]["code"] == 4401 and "URL" in seen["inUrl"]["reason"]
    assert seen["notMember"] == {"code": 4404, "reason": "Project not found."}
    assert seen["protocol"] == "cairn.v1"
    assert seen["first"] == {"topic": "workloads", "type": "subscribed"}


def test_signing_out_in_another_tab_stops_the_pages_socket_and_says_why(cairn, new_page):  # noqa: F811
    page = new_page(cairn.url)
    sign_in(page, "erin")
    expect(page).to_have_url(re.compile(rf"{workloads_url()}$"), timeout=UI)
    indicator = page.get_by_test_id("live-indicator")
    expect(indicator).to_have_attribute("data-status", "open", timeout=UI)

    other = page.context.new_page()  # same browser, same cookies
    other.goto(f"{cairn.url}/signin")
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    answer = other.request.delete(f"{cairn.url}/api/v1/auth/session/", headers={"X-CSRFToken": csrf})
    assert answer.status == 204

    expect(indicator).to_have_attribute("data-status", "closed", timeout=5_000)
    indicator.hover()
    expect(page.get_by_text(re.compile("Your session has ended"))).to_be_visible(timeout=UI)
