"""The tenant-scoped base viewset every project route builds on.

It resolves `{project}` from the URL, answers 404 to anyone who is not a member (so the
existence of other projects' objects never leaks), checks the caller's role against the
action, and scopes the queryset to the project. It fails closed: an unsafe action that a
subclass forgot to declare in `required_actions` is refused.

Creates are idempotent with an `Idempotency-Key` header (kept per project, 24 hours): the whole
request runs in one transaction that first claims the key, so a retry of a request whose answer
was lost gets the first answer again (with `Idempotent-Replayed: true`), never a second object; a
concurrent retry waits for the first to commit; the same key with a different body, route or
user is a 422. Only successful answers are kept: a failed create releases its key.
"""
import hashlib
import json

from django.db import transaction
from rest_framework import exceptions, permissions, viewsets
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from apps.projects.choices import Action, role_allows
from apps.projects.models import Project
from apps.projects.selectors import membership_role
from apps.projects.services import IdempotentReplay, idempotency_key_claim, idempotency_key_complete

IDEMPOTENCY_HEADER = "Idempotency-Key"


class _Replay(Exception):
    def __init__(self, replay: IdempotentReplay):
        self.replay = replay


def _fingerprint(request) -> str:
    try:
        body = json.dumps(request.data, sort_keys=True, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        body = repr(request.data)
    text = "\n".join([request.method, request.path, str(request.user.pk), body])
    return hashlib.sha256(text.encode()).hexdigest()


class ProjectScopedMixin:
    project_url_kwarg = "project"
    # DRF action name -> apps.projects.choices.Action. Safe methods default to READ.
    required_actions: dict[str, str] = {}

    # Creates honour an Idempotency-Key. A viewset whose create answers a secret (which would be
    # stored with the answer) turns this off and is idempotent its own way.
    idempotency_keys = True

    project: Project
    role: str

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # authentication, permissions, throttling
        slug = kwargs.get(self.project_url_kwarg)
        project = Project.objects.filter(slug=slug).first() if slug else None
        role = membership_role(user=request.user, project=project) if project else None
        if project is None or role is None:
            raise exceptions.NotFound("Project not found.")
        self.project, self.role = project, role
        needed = self.required_actions.get(self.action)
        if needed is None:
            if request.method not in permissions.SAFE_METHODS:
                raise exceptions.PermissionDenied("This action is not allowed.")
            needed = Action.READ
        if not role_allows(role, needed):
            raise exceptions.PermissionDenied(
                f"Your role in project '{project.slug}' is {role}; this needs {needed.replace('_', ' ')} rights."
            )
        self._idempotency_claim = None
        key = request.headers.get(IDEMPOTENCY_HEADER)
        if key is not None and self._idempotent_create:
            claim = idempotency_key_claim(project=project, user=request.user, key=key.strip(),
                                          fingerprint=_fingerprint(request))
            if isinstance(claim, IdempotentReplay):
                raise _Replay(claim)
            self._idempotency_claim = claim

    @property
    def _idempotent_create(self) -> bool:
        return (self.idempotency_keys and getattr(self, "action", None) == "create" and self.request.method == "POST"
                and getattr(self.request.user, "pk", None) is not None)

    def dispatch(self, request, *args, **kwargs):
        if self.idempotency_keys and IDEMPOTENCY_HEADER in request.headers and request.method == "POST" and (
                getattr(self, "action_map", {}).get("post") == "create"):
            with transaction.atomic():  # the key's claim, the create and its answer: one commit
                return super().dispatch(request, *args, **kwargs)
        return super().dispatch(request, *args, **kwargs)

    def handle_exception(self, exc):
        if isinstance(exc, _Replay):
            response = Response(exc.replay.response, status=exc.replay.status_code)
            response["Idempotent-Replayed"] = "true"
            return response
        return super().handle_exception(exc)

    def finalize_response(self, request, response, *args, **kwargs):
        claim = getattr(self, "_idempotency_claim", None)
        if claim is not None:
            self._idempotency_claim = None
            if 200 <= response.status_code < 300:
                body = json.loads(JSONRenderer().render(response.data) or b"null")
                idempotency_key_complete(claim=claim, status_code=response.status_code, response=body)
            else:
                transaction.set_rollback(True)  # nothing was created: the key is free for a corrected retry
        return super().finalize_response(request, response, *args, **kwargs)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request project
            return super().get_queryset().none()
        return super().get_queryset().filter(project=self.project)


class ProjectScopedViewSet(ProjectScopedMixin, viewsets.GenericViewSet):
    pass
