"""apps/core/logsafe.py: tokens never reach a log line, whichever logger writes it."""
import logging

import pytest
from django.conf import settings

from apps.core.logsafe import SERVER_LOGGERS, RedactSecrets, install
from tests.core.test_websocket_server import server  # noqa: F401 - the fixture: uvicorn as docker-compose runs it

TOKEN = "cairn_0123456789ab_S3cr3t-Value_xyz"


def _record(msg, *args, name="uvicorn.error"):
    return logging.LogRecord(name, logging.INFO, __file__, 1, msg, args, None)


def test_query_string_tokens_and_token_shaped_strings_are_blanked():
    record = _record('%s - "WebSocket %s" [accepted]', "127.0.0.1:5", f"/ws/projects/p/live/?a=1&token={TOKEN}&b=2")
    assert RedactSecrets().filter(record) is True  # the line is kept...
    assert record.getMessage() == '127.0.0.1:5 - "WebSocket /ws/projects/p/live/?a=1&token=[redacted]&b=2" [accepted]'
    record = _record("sent %s in a body", TOKEN)
    RedactSecrets().filter(record)
    assert record.getMessage() == "sent cairn_[redacted] in a body"
    record = _record("GET /api/v1/runs/?key=loss&page=2")
    RedactSecrets().filter(record)
    assert record.getMessage() == "GET /api/v1/runs/?key=loss&page=2"  # other parameters are left alone


def test_the_filter_is_on_the_servers_loggers_and_djangos_console_handler():
    install()
    install()  # idempotent
    for name in SERVER_LOGGERS:
        assert sum(isinstance(f, RedactSecrets) for f in logging.getLogger(name).filters) == 1
    assert settings.LOGGING["handlers"]["console"]["filters"] == ["redact_secrets"]
    handler = next(h for h in logging.getLogger().handlers if h.get_name() == "console")
    record = _record("token=%s", TOKEN, name="apps.anything")
    assert handler.filter(record) and TOKEN not in record.getMessage()


def test_an_access_record_keeps_its_shape_for_uvicorns_formatter():
    """uvicorn's AccessFormatter unpacks the record's args (client, method, path, version, status):
    the line is written with the token blanked, and no traceback."""
    from uvicorn.logging import AccessFormatter

    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:5", "GET", f"/healthz?token={TOKEN}&x=1", "1.1", 200), None)
    assert RedactSecrets().filter(record)
    line = AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s', use_colors=False).format(record)
    assert line == '127.0.0.1:5 - "GET /healthz?token=[redacted]&x=1 HTTP/1.1" 200 OK'


@pytest.mark.django_db(transaction=True)  # the server process uses the test database
def test_the_access_log_of_a_real_server_keeps_the_line(server):  # noqa: F811 - the fixture imported above
    """uvicorn as docker-compose starts it (tests/core/test_websocket_server.py's server): requests
    with a token in the query string are logged, blanked, and nothing breaks the formatter."""
    import requests

    assert requests.get(f"{server.url}/healthz?token={TOKEN}", timeout=10).status_code == 200
    requests.get(f"{server.url}/api/v1/projects/?access_token={TOKEN}&page=1", timeout=10)
    from tests.processes import wait_for

    wait_for(lambda: "/api/v1/projects/?access_token=" in server.output(), timeout=10, message="the access line")
    output = server.output()
    assert TOKEN not in output and "Traceback" not in output and "--- Logging error ---" not in output, output
    assert '"GET /healthz?token=[redacted] HTTP/1.1" 200' in output, output
    assert '"GET /api/v1/projects/?access_token=[redacted]&page=1 HTTP/1.1" 401' in output, output
