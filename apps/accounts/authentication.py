from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from .models import TOKEN_PREFIX, ApiToken
from .selectors import api_token_find


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer cairn_<prefix>_<secret>`. Read-only tokens cannot write."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        parts = header.split()
        if parts[0] not in (self.keyword, "Token"):
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <token>'.")
        token = parts[1]
        if not token.startswith(TOKEN_PREFIX) or token.count("_") < 2:
            raise exceptions.AuthenticationFailed("Malformed API token.")
        api_token = api_token_find(token)
        if api_token is None:
            raise exceptions.AuthenticationFailed("Invalid API token.")
        if api_token.revoked_at is not None:
            raise exceptions.AuthenticationFailed("This API token has been revoked.")
        if not api_token.is_active:
            raise exceptions.AuthenticationFailed("This API token has expired.")
        if not api_token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive.")
        now = timezone.now()
        # Touch last_used at most once a minute to keep reads cheap.
        if api_token.last_used_at is None or (now - api_token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=api_token.pk).update(last_used_at=now)
        return api_token.user, api_token

    def authenticate_header(self, request):
        return self.keyword


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "apps.accounts.authentication.ApiTokenAuthentication"
    name = "ApiToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A Cairn API token: cairn_<prefix>_<secret>"}
