"""The OpenAPI schema class of the API (REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]).

drf-spectacular documents the success answer of each operation; the error answers the API
gives are the same everywhere (apps.core.errors: `{"detail": ...}` plus field `errors`), so they
are added here once, for the operations that can give them, instead of on every view:

- 400 bad input (body, query parameter, page number) — every operation;
- 401 not signed in or bad credentials — every operation;
- 403 not allowed — unless the view allows anyone;
- 404 no such object, or a project you are not a member of — every operation (the tenancy
  answer, a NUL in the path, a page past the last);
- 409 a conflict with the current state — operations that change something;
- 413 / 415 body too large / not JSON — operations with a body;
- 429 over a rate limit — views with a throttle.
Codes a view documents itself are left as it says.
"""
from drf_spectacular import openapi
from rest_framework.permissions import AllowAny

from .serializers import DetailSerializer

_WRITES = {"POST", "PUT", "PATCH", "DELETE"}
_BODIES = {"POST", "PUT", "PATCH"}


class AutoSchema(openapi.AutoSchema):
    def _error_codes(self) -> list[str]:
        codes = ["400", "401"]  # 401 also where anyone is allowed: for bad credentials sent anyway
        if not any(isinstance(permission, AllowAny) for permission in self.view.get_permissions()):
            codes.append("403")
        codes.append("404")
        if self.method in _WRITES:
            codes.append("409")
        if self.method in _BODIES:
            codes += ["413", "415"]
        if self.view.get_throttles():
            codes.append("429")
        return codes

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        for code in self._error_codes():
            if code not in responses:
                responses[code] = self._get_response_for_code(DetailSerializer, code, direction=direction)
        return dict(sorted(responses.items()))
