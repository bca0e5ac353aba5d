"""Admin for users and API tokens. A token's secret hash is never shown or editable."""
from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from apps.core.errors import ServiceError
from apps.projects.models import Membership

from .models import TOKEN_PREFIX, ApiToken, ApiTokenScope, User
from .services import api_token_revoke


class UserMembershipInline(admin.TabularInline):
    model = Membership
    fk_name = "user"
    fields = ["project", "role", "created_at"]
    readonly_fields = ["created_at"]
    autocomplete_fields = ["project"]
    extra = 0
    verbose_name = "project membership"


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    list_display = ["username", "email", "first_name", "last_name", "is_active", "is_staff", "last_login"]
    list_filter = ["is_staff", "is_superuser", "is_active"]
    inlines = [UserMembershipInline]


class ApiTokenForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(
        choices=ApiTokenScope.choices,
        widget=forms.CheckboxSelectMultiple,
        help_text="A token without 'write' can only read.",
    )

    class Meta:
        model = ApiToken
        fields = ["name", "scopes", "expires_at"]


class TokenStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "Active"), ("expired", "Expired"), ("revoked", "Revoked")]

    def queryset(self, request, queryset):
        now = timezone.now()
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        if self.value() == "expired":
            return queryset.filter(revoked_at__isnull=True, expires_at__lte=now)
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True).exclude(expires_at__lte=now)
        return queryset


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created by their owner (API / `cairn login`), so the secret is shown only to them.

    Staff may rename a token, narrow its scopes, shorten its life or revoke it.
    """

    form = ApiTokenForm
    list_display = ["name", "user", "key", "scopes", "state", "created_at", "expires_at", "last_used_at", "revoked_at"]
    list_filter = [TokenStateFilter, "created_at", "expires_at"]
    list_select_related = ["user"]
    search_fields = ["name", "prefix", "user__username", "user__email"]
    fields = ["user", "name", "key", "scopes", "expires_at", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["user", "key", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.display(description="key", ordering="prefix")
    def key(self, obj: ApiToken) -> str:
        return f"{TOKEN_PREFIX}{obj.prefix}_…"

    @admin.display(description="state")
    def state(self, obj: ApiToken) -> str:
        if obj.revoked_at is not None:
            return "revoked"
        return "active" if obj.is_active else "expired"

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = 0
        for token in queryset.filter(revoked_at__isnull=True):
            try:
                api_token_revoke(token=token)
            except ServiceError:
                continue  # revoked meanwhile
            revoked += 1
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)
