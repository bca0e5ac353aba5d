"""Admin for users and API tokens. A token's secret hash is never shown or editable.

A user's project memberships are an inline that apps/projects/admin.py adds to this UserAdmin
(it registers a subclass in its place): accounts sits below projects and does not import it."""
from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from apps.audit.choices import AuditAction
from apps.audit.services import audit_record
from apps.core.errors import ServiceError

from .models import TOKEN_PREFIX, ApiToken, ApiTokenScope, User
from .services import api_token_change, api_token_revoke

# Changes to these are recorded with their new value; other fields by name only.
USER_FLAGS = ("is_active", "is_staff", "is_superuser")


def _record_user_deleted(user: User) -> None:
    """Recorded before the delete: it then clears the link to the user in every record, and keeps the name."""
    audit_record(action=AuditAction.USER_DELETE, target=user,
                 details={"projects": sorted(user.memberships.values_list("project__slug", flat=True))})


@admin.register(User)
class UserAdmin(DjangoUserAdmin):
    list_display = ["username", "email", "first_name", "last_name", "is_active", "is_staff", "last_login"]
    list_filter = ["is_staff", "is_superuser", "is_active"]

    def save_model(self, request: HttpRequest, obj: User, form, change: bool) -> None:
        """Creating a user and changing one (above all who is a Cairn admin) go in the audit log."""
        super().save_model(request, obj, form, change)
        fields = sorted(name for name in form.changed_data if not name.startswith("password")
                        and name != "usable_password")
        details = {"fields": fields, **{flag: getattr(obj, flag) for flag in USER_FLAGS if flag in fields or not change}}
        if any(name.startswith("password") for name in form.changed_data):
            details["password_set"] = True
        if change and not fields and "password_set" not in details:
            return
        audit_record(action=AuditAction.USER_CHANGE if change else AuditAction.USER_CREATE, target=obj,
                     details=details)

    def delete_model(self, request: HttpRequest, obj: User) -> None:
        with transaction.atomic():
            _record_user_deleted(obj)
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[User]) -> None:
        with transaction.atomic():
            for user in queryset:
                _record_user_deleted(user)
            super().delete_queryset(request, queryset)

    def user_change_password(self, request: HttpRequest, id, form_url=""):
        response = super().user_change_password(request, id, form_url)
        if request.method == "POST" and response.status_code == 302:  # saved
            user = self.get_object(request, id)
            audit_record(action=AuditAction.USER_CHANGE, target=user, details={"fields": [], "password_set": True})
        return response


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

    def save_model(self, request: HttpRequest, obj: ApiToken, form, change: bool) -> None:
        api_token_change(token=obj, fields=form.changed_data)

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
