"""apps/core/logsafe.py: tokens never reach a log line, whichever logger writes it."""
import logging

from django.conf import settings

from apps.core.logsafe import SERVER_LOGGERS, RedactSecrets, install

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
