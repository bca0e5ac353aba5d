from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.response import Response

from apps.accounts.models import User
from apps.core.serializers import DetailSerializer

from ..choices import Action, role_allows
from ..models import Membership, Project
from ..selectors import membership_role, projects_visible_to
from ..services import (
    membership_add,
    membership_change_role,
    membership_remove,
    project_create,
    project_delete,
    project_update,
)
from .base import ProjectScopedViewSet
from .serializers import (
    MembershipCreateSerializer,
    MembershipSerializer,
    MembershipUpdateSerializer,
    ProjectSerializer,
    ProjectUpdateSerializer,
)


class ProjectViewSet(viewsets.ModelViewSet):
    """Projects you belong to. Creating one makes you its owner."""

    serializer_class = ProjectSerializer
    queryset = Project.objects.all()
    lookup_field = "slug"
    lookup_url_kwarg = "project"
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    ordering_fields = ["slug", "name", "created_at"]
    filterset_fields = ["slug"]

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Project.objects.none()
        return projects_visible_to(user=self.request.user).distinct()

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if self.request and self.request.user.is_authenticated and not getattr(self, "swagger_fake_view", False):
            if self.request.user.is_staff:
                context["roles"] = {pk: "owner" for pk in Project.objects.values_list("pk", flat=True)}
            else:
                context["roles"] = dict(Membership.objects.filter(user=self.request.user).values_list("project_id", "role"))
        return context

    def _require(self, project: Project, action: str) -> None:
        role = membership_role(user=self.request.user, project=project)
        if not role_allows(role, action):
            raise exceptions.PermissionDenied(f"Your role in project '{project.slug}' is {role}; this needs {action.replace('_', ' ')} rights.")

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = project_create(owner=self.request.user, **data)

    @extend_schema(request=ProjectUpdateSerializer, responses={200: ProjectSerializer})
    def partial_update(self, request, *args, **kwargs):
        project = self.get_object()
        self._require(project, Action.EDIT_PROJECT)
        serializer = ProjectUpdateSerializer(project, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        project_update(project=project, **serializer.validated_data)
        return Response(self.get_serializer(project).data)

    @extend_schema(responses={204: None, 409: DetailSerializer})
    def destroy(self, request, *args, **kwargs):
        project = self.get_object()
        self._require(project, Action.DELETE_PROJECT)
        project_delete(project=project)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MembershipViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ProjectScopedViewSet):
    """Who belongs to the project, with which role."""

    serializer_class = MembershipSerializer
    queryset = Membership.objects.select_related("user")
    lookup_field = "user__username"
    lookup_url_kwarg = "username"
    lookup_value_regex = r"[\w.@+-]+"
    required_actions = {
        "create": Action.MANAGE_MEMBERS,
        "partial_update": Action.MANAGE_MEMBERS,
        "destroy": Action.MANAGE_MEMBERS,
    }

    @extend_schema(request=MembershipCreateSerializer, responses={201: MembershipSerializer})
    def create(self, request, project=None):
        serializer = MembershipCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user = User.objects.filter(username=serializer.validated_data["username"], is_active=True).first()
        if user is None:
            return Response({"detail": "No such user."}, status=status.HTTP_400_BAD_REQUEST)
        membership = membership_add(project=self.project, actor_role=self.role, user=user,
                                    role=serializer.validated_data["role"])
        return Response(MembershipSerializer(membership).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=MembershipUpdateSerializer, responses={200: MembershipSerializer})
    def partial_update(self, request, project=None, username=None):
        serializer = MembershipUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        membership = membership_change_role(membership=self.get_object(), actor_role=self.role,
                                            role=serializer.validated_data["role"])
        return Response(MembershipSerializer(membership).data)

    @extend_schema(responses={204: None, 409: DetailSerializer})
    def destroy(self, request, project=None, username=None):
        membership_remove(membership=self.get_object(), actor_role=self.role)
        return Response(status=status.HTTP_204_NO_CONTENT)


