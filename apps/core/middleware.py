"""Refuses requests carrying characters no name, slug, id, token or session key in Cairn can
contain.

A percent-encoded NUL (%00) decodes into the path, from there into a URL keyword argument and
into a database lookup that PostgreSQL refuses with an error (a 500); a NUL in the
Authorization or Cookie header reaches the token or session lookup the same way. Checking once
here, ahead of URL routing and authentication, covers every route:

- a NUL or other control character in the path -> 404, as a name that cannot exist (under /api/
  with the API's `{"detail": ...}` body, see apps.core.views.not_found);
- a NUL in a request header -> 400 naming the header (most HTTP servers refuse these already).

Query strings need no such check: every query parameter goes through a form or serializer
field, which refuses NUL characters with a 400 naming the parameter. Lone surrogates cannot
arrive in any of these: Django decodes paths and query strings as UTF-8, replacing or
re-escaping what is not valid, and headers as Latin-1.
"""
import re

from django.http import Http404, JsonResponse
from django.utils.deprecation import MiddlewareMixin

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class RejectControlCharactersMiddleware(MiddlewareMixin):
    """Sync and async capable (MiddlewareMixin), so it adds no thread hop under ASGI."""

    def process_request(self, request):
        if _CONTROL.search(request.path_info):
            raise Http404("No name contains control characters.")  # handler404: JSON under /api/
        for key, value in request.META.items():
            if key.startswith("HTTP_") and isinstance(value, str) and "\x00" in value:
                header = key.removeprefix("HTTP_").replace("_", "-").title()
                return JsonResponse({"detail": f"{header}: headers must not contain NUL (\\u0000) characters."},
                                    status=400)
        return None
