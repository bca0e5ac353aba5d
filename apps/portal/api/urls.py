"""All API routes under /api/v1/. Project-scoped routes live under projects/<project>/."""
from django.urls import include, path
from rest_framework.routers import SimpleRouter

from apps.accounts.api.views import ApiTokenViewSet, LoginView, MeView, SessionView
from apps.clusters.api.views import ClusterViewSet, NetworkProfileViewSet, NodeViewSet, ResourcePoolViewSet
from apps.projects.api.audit import ProjectAuditEventViewSet
from apps.projects.api.views import MembershipViewSet, ProjectViewSet
from apps.quotas.api.views import QuotaViewSet
from apps.scheduling.api.views import PoolQueueView
from apps.storage.api.views import DatasetViewSet, RegisteredModelViewSet, VolumeViewSet
from apps.sweeps.api.views import SweepViewSet
from apps.telemetry.api.views import ClusterOverviewView, NodeTelemetryView, WorkloadTelemetryViewSet
from apps.tracking.api.views import RunViewSet
from apps.training.api.views import WorkloadResilienceViewSet
from apps.workloads.api.views import KindListView, WorkloadReadViewSet
from apps.workloads.kinds import kind_spec, registered_kinds

router = SimpleRouter()
router.register("tokens", ApiTokenViewSet, basename="token")
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("pools", ResourcePoolViewSet, basename="pool")
router.register("nodes", NodeViewSet, basename="node")
router.register("network-profiles", NetworkProfileViewSet, basename="network-profile")
router.register("projects", ProjectViewSet, basename="project")

project_router = SimpleRouter()
project_router.register("members", MembershipViewSet, basename="member")
project_router.register("quotas", QuotaViewSet, basename="quota")
project_router.register("workloads", WorkloadReadViewSet, basename="workload")
for _kind in registered_kinds():  # each kind's own collection, from its KindSpec (apps/workloads/kinds.py)
    _spec = kind_spec(_kind)
    if _spec.api_viewset is not None:
        project_router.register(_spec.route, _spec.api_viewset, basename=_spec.route.removesuffix("s"))
project_router.register("runs", RunViewSet, basename="run")
project_router.register("sweeps", SweepViewSet, basename="sweep")
project_router.register("volumes", VolumeViewSet, basename="volume")
project_router.register("models", RegisteredModelViewSet, basename="model")
project_router.register("datasets", DatasetViewSet, basename="dataset")
project_router.register("workload-telemetry", WorkloadTelemetryViewSet, basename="workload-telemetry")

urlpatterns = [
    path("me/", MeView.as_view(), name="me"),
    path("kinds/", KindListView.as_view(), name="kinds"),
    path("auth/login/", LoginView.as_view(), name="login"),
    path("auth/session/", SessionView.as_view(), name="session"),
    path("cluster/overview/", ClusterOverviewView.as_view(), name="cluster-overview"),
    path("pools/<str:pool>/queue/", PoolQueueView.as_view(), name="pool-queue"),
    path("telemetry/nodes/<str:node>/", NodeTelemetryView.as_view(), name="node-telemetry"),
    path("", include("apps.audit.api.urls")),
    path("projects/<str:project>/audit/", ProjectAuditEventViewSet.as_view({"get": "list"}),
         name="project-audit-list"),
    # Beside the workloads router's routes: one workload's resilience, whatever its kind.
    path("projects/<str:project>/workloads/<str:pk>/resilience/",
         WorkloadResilienceViewSet.as_view({"get": "retrieve"}), name="workload-resilience"),
    path("", include(router.urls)),
    path("projects/<str:project>/", include(project_router.urls)),
]
