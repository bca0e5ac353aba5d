"""The queue of a resource pool, as the scheduler last ordered it."""
import django_filters
from django.db.models import F
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, generics

from apps.clusters.models import ResourcePool
from apps.core.serializers import DetailSerializer
from apps.projects.models import Membership
from apps.workloads.choices import WaitingOn, WorkloadStatus
from apps.workloads.models import Workload

from .serializers import QueueEntrySerializer


class QueueFilter(django_filters.FilterSet):
    # Kinds name no project, so they filter every entry, including those shown without details.
    waiting_on = django_filters.MultipleChoiceFilter(choices=WaitingOn.choices)

    class Meta:
        model = Workload
        fields = ["waiting_on"]


@extend_schema(summary="Queued workloads of a pool, in scheduling order",
               responses={200: QueueEntrySerializer(many=True), 401: DetailSerializer, 404: DetailSerializer})
class PoolQueueView(generics.ListAPIView):
    """Every signed-in user may see a pool's queue (to judge their wait); details of workloads of
    projects they are not a member of are left out. Staff see everything."""

    serializer_class = QueueEntrySerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = QueueFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no pool in the URL
            return Workload.objects.none()
        pool = ResourcePool.objects.filter(name=self.kwargs["pool"]).first()
        if pool is None:
            raise exceptions.NotFound("Resource pool not found.")
        return (
            Workload.objects.filter(pool=pool, status=WorkloadStatus.QUEUED)
            .select_related("project")
            .order_by(F("queue_position").asc(nulls_last=True), "priority", "created_at", "id")
        )

    def get_serializer_context(self):
        context = super().get_serializer_context()
        user = self.request.user
        if not user.is_staff:
            context["visible_projects"] = set(Membership.objects.filter(user=user).values_list("project_id", flat=True))
        return context
