from django.apps import AppConfig


class DeploymentsConfig(AppConfig):
    name = "apps.deployments"
    label = "deployments"

    def ready(self) -> None:
        from apps.workloads.choices import Kind
        from apps.workloads.kinds import KindSpec, register_kind

        from .api.views import DeploymentViewSet  # the kind's collection, routed by portal from the spec
        from .readiness import replica_ready
        from .selectors import deployment_endpoint, deployment_gateway_url, deployment_revision_plan
        from .services import (
            deployment_before_scheduling,
            deployment_scale_admit,
            deployment_scale_wait,
            scale_ups_pending,
        )

        register_kind(KindSpec(kind=Kind.DEPLOYMENT, route="deployments", label=Kind.DEPLOYMENT.label,
                               endpoint=deployment_endpoint, lists_empty_runs=False,
                               serves_port=True, gateway_url=deployment_gateway_url,
                               kubernetes_object="Deployment", independent_replicas=True,
                               probe_ready=replica_ready, revision_plan=deployment_revision_plan,
                               api_viewset=DeploymentViewSet,
                               # the autoscaler and rollouts before each scheduling cycle; scale-ups asked of it
                               before_scheduling=deployment_before_scheduling, scale_ups=scale_ups_pending,
                               scale_admit=deployment_scale_admit, scale_wait=deployment_scale_wait))
