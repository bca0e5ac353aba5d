"""The queue of a resource pool, as the scheduler last ordered it."""
import django_filters
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, generics

from apps.clusters.models import PoolQueue, ResourcePool
from apps.clusters.selectors import QueuePositions
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
        pool = ResourcePool.objects.filter(name=self.kwargs["pool"]).select_related("queue").first()
        if pool is None:
            raise exceptions.NotFound("Resource pool not found.")
        self.pool = pool
        try:
            order = pool.queue.workloads
        except PoolQueue.DoesNotExist:
            order = []
        self.positions = QueuePositions()
        self.positions.seed(pool_id=pool.pk, workloads=order)
        return (
            Workload.objects.filter(pool=pool, status=WorkloadStatus.QUEUED)
            .select_related("project")
            .order_by("priority", "created_at", "id")
        )

    def list(self, request, *args, **kwargs):
        """The queue in the order of the scheduler's last cycle (PoolQueue); work it has not ordered
        yet (submitted since) after it, by priority and submission."""
        queryset = self.filter_queryset(self.get_queryset())
        ids = list(queryset.values_list("pk", flat=True))
        last = len(ids) + 1
        of, pool_id = self.positions.of, self.pool.pk
        ids.sort(key=lambda pk: of(pool_id=pool_id, workload_id=pk) or last)  # stable: the rest keep their order
        page = self.paginate_queryset(ids)
        rows = queryset.in_bulk(page)
        serializer = self.get_serializer([rows[pk] for pk in page if pk in rows], many=True)
        return self.get_paginated_response(serializer.data)

    def get_serializer_context(self):
        context = super().get_serializer_context()
        context["queue_positions"] = getattr(self, "positions", None) or QueuePositions()
        user = self.request.user
        if not user.is_staff:
            context["visible_projects"] = set(Membership.objects.filter(user=user).values_list("project_id", flat=True))
        return context
