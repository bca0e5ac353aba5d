from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins, status
from rest_framework.response import Response

from apps.clusters.selectors import pool_accelerators
from apps.core.serializers import DetailSerializer
from apps.projects.api.base import ProjectScopedViewSet
from apps.projects.choices import Action

from ..models import Quota
from ..selectors import quota_usage
from ..services import quota_create, quota_delete, quota_update
from .serializers import QuotaSerializer, QuotaUpdateSerializer


class QuotaViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ProjectScopedViewSet):
    """The project's quotas with current usage. Members read; only Cairn administrators change them."""

    queryset = Quota.objects.select_related("project", "pool")
    serializer_class = QuotaSerializer
    filterset_fields = ["pool__name"]
    required_actions = {"create": Action.READ, "partial_update": Action.READ, "destroy": Action.READ}

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if request.method not in ("GET", "HEAD", "OPTIONS") and not request.user.is_staff:
            raise exceptions.PermissionDenied("Only Cairn administrators can change quotas.")

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if not getattr(self, "swagger_fake_view", False) and hasattr(self, "project"):
            quotas = list(Quota.objects.filter(project=self.project).select_related("pool"))
            context["usage"] = quota_usage(quotas=quotas)
            context["pool_accelerators"] = pool_accelerators(pools={q.pool for q in quotas})
        return context

    @extend_schema(request=QuotaSerializer, responses={201: QuotaSerializer, 409: DetailSerializer})
    def create(self, request, project=None):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        quota = quota_create(project=self.project, **serializer.validated_data)
        return Response(self.get_serializer(quota).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=QuotaUpdateSerializer, responses={200: QuotaSerializer})
    def partial_update(self, request, project=None, pk=None):
        quota = self.get_object()
        serializer = QuotaUpdateSerializer(quota, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        quota = quota_update(quota=quota, **serializer.validated_data)
        return Response(self.get_serializer(quota).data)

    @extend_schema(responses={204: None, 409: DetailSerializer})
    def destroy(self, request, project=None, pk=None):
        quota_delete(quota=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
