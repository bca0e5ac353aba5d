"""PostgreSQL restarting (bench/chaos.py's postgres scenario) is a 503 with a detail and a
Retry-After, not a 500: the client's retry is the right answer."""
from django.db import OperationalError

from apps.core.errors import exception_handler


def test_a_database_that_does_not_answer_is_a_503_with_retry_after():
    response = exception_handler(OperationalError("the database system is starting up"), {})
    assert response.status_code == 503
    assert "Idempotency-Key" in response.data["detail"] and response["Retry-After"] == "2"
