"""Run tokens: `Authorization: Bearer cairnrun_<prefix>_<secret>`, accepted only by the tracking
endpoints that write into their own run (batches, finish). Everywhere else they are refused,
because the general ApiTokenAuthentication does not know the prefix."""
from django.utils.functional import cached_property
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from .models import RUN_TOKEN_PREFIX, RunToken


class RunTokenUser:
    """The caller behind a run token: authenticated, but a member of nothing."""

    is_authenticated = True
    is_active = True
    is_staff = False
    is_superuser = False
    is_anonymous = False
    pk = id = None
    username = ""

    def __init__(self, token: RunToken):
        self.token = token

    @cached_property
    def run(self):
        return self.token.run

    def __str__(self) -> str:
        return f"run-token:{self.token.prefix}"


def run_token_find(token: str) -> RunToken | None:
    if not token.startswith(RUN_TOKEN_PREFIX):
        return None
    prefix, _, secret = token[len(RUN_TOKEN_PREFIX):].partition("_")
    if not prefix or not secret:
        return None
    found = RunToken.objects.select_related("run", "run__project").filter(prefix=prefix).first()
    if found is None or not found.matches(secret):
        return None
    return found


class RunTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if len(header) != 2 or header[0] != self.keyword or not header[1].startswith(RUN_TOKEN_PREFIX):
            return None  # not ours: the next authentication class decides
        token = run_token_find(header[1])
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid run token.")
        if token.revoked_at is not None:
            raise exceptions.AuthenticationFailed("This run token has been revoked.")
        return RunTokenUser(token), token

    def authenticate_header(self, request):
        return self.keyword


class RunTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.tracking.authentication.RunTokenAuthentication"
    name = "RunToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "A write-only run token: cairnrun_<prefix>_<secret> (injected as CAIRN_RUN_TOKEN)"}
