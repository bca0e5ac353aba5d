"""Sign-ins through Django's session login (dashboard, Django admin) and failed sign-ins from
any `authenticate()` call (those two and `POST /api/v1/auth/login/`)."""
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.dispatch import receiver

from .choices import AuditAction
from .services import audit_record


def _http_request(request):
    """DRF wraps the HttpRequest; the audit log reads META from either."""
    return getattr(request, "_request", request)


@receiver(user_logged_in, dispatch_uid="audit_user_logged_in")
def _record_login(sender, request, user, **kwargs) -> None:
    audit_record(action=AuditAction.LOGIN, actor=user, target=user, request=_http_request(request),
                 details={"method": "session"})


@receiver(user_logged_out, dispatch_uid="audit_user_logged_out")
def _record_logout(sender, request, user, **kwargs) -> None:
    if user is not None:
        audit_record(action=AuditAction.LOGOUT, actor=user, target=user, request=_http_request(request))


@receiver(user_login_failed, dispatch_uid="audit_user_login_failed")
def _record_login_failed(sender, credentials: dict, request=None, **kwargs) -> None:
    """Who tried which account from where; never the password (Django masks it, and we keep
    only the username)."""
    User = get_user_model()
    raw = str(credentials.get(User.USERNAME_FIELD) or credentials.get("username") or "")[:150]
    # What the database can store: no NUL, no lone surrogate (shown as "?").
    username = raw.replace("\x00", "").encode("utf-8", "replace").decode("utf-8")
    account = User.objects.filter(**{User.USERNAME_FIELD: username}).first() if username == raw and raw else None
    audit_record(
        action=AuditAction.LOGIN_FAILED,
        target_type=User._meta.label_lower,
        target_id=account.pk if account is not None else "",
        target_repr=username,
        request=_http_request(request) if request is not None else None,
        details={"username": username, "known_user": account is not None},
    )
