"""One error shape for the whole API: {"detail": "..."} plus field errors when there are some."""
import logging

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

logger = logging.getLogger(__name__)


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state of the resource."
    default_code = "conflict"


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body is too large."
    default_code = "payload_too_large"


class ServiceError(Exception):
    """Raised by services for a rule the caller broke; views turn it into a 4xx."""

    status_code = 400

    def __init__(self, detail: str, *, status_code: int | None = None):
        super().__init__(detail)
        self.detail = detail
        if status_code is not None:
            self.status_code = status_code


class ConflictError(ServiceError):
    status_code = 409


def _summarise(data) -> str:
    """A one-line human summary of DRF's nested validation errors."""
    if isinstance(data, dict):
        for key, value in data.items():
            inner = _summarise(value)
            return inner if key in ("non_field_errors", "detail") else f"{key}: {inner}"
    if isinstance(data, list) and data:
        return _summarise(data[0])
    return str(data)


class DatabaseUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = ("The database did not answer (restarting?). Retry in a few seconds: a create sent with "
                      "the same Idempotency-Key is safe to retry.")
    default_code = "database_unavailable"


def exception_handler(exc, context):
    if isinstance(exc, (OperationalError, InterfaceError)):
        # PostgreSQL restarting or unreachable: the client's retry (with its Idempotency-Key for a
        # create) is the right answer, which a 503 says and a 500 does not.
        logger.warning("database unavailable: %s", exc)
        response = drf_exception_handler(DatabaseUnavailable(), context)
        response["Retry-After"] = "2"
        return response
    if isinstance(exc, ServiceError):
        return Response({"detail": exc.detail}, status=exc.status_code)
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge()
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(detail={"detail": exc.messages})
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    if isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        errors = response.data
        body = {"detail": _summarise(errors)}
        if isinstance(errors, dict):
            body["errors"] = errors
        elif isinstance(errors, list):
            body["errors"] = {"non_field_errors": errors}
        response.data = body
    elif isinstance(response.data, dict) and "detail" not in response.data:
        response.data = {"detail": _summarise(response.data), "errors": response.data}
    return response
