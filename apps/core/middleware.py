"""Refuses URL paths that carry characters no name, slug or id in Cairn can contain.

A percent-encoded NUL (%00) decodes into the path, from there into a URL keyword argument and
into a database lookup that PostgreSQL refuses with an error (a 500). Checking once here, ahead
of URL routing, covers every route: a NUL or other control character in the path answers 404,
as a name that cannot exist does (under /api/ with the API's `{"detail": ...}` body, see
apps.core.views.not_found).

Query strings need no such check: every query parameter goes through a form or serializer
field, which refuses NUL characters with a 400 naming the parameter. Lone surrogates cannot
arrive in either: Django decodes paths and query strings as UTF-8, replacing or re-escaping
what is not valid.
"""
import re

from django.http import Http404
from django.utils.deprecation import MiddlewareMixin

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class RejectControlCharactersMiddleware(MiddlewareMixin):
    """Sync and async capable (MiddlewareMixin), so it adds no thread hop under ASGI."""

    def process_request(self, request):
        if _CONTROL.search(request.path_info):
            raise Http404("No name contains control characters.")  # handler404: JSON under /api/
        return None
