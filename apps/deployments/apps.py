from django.apps import AppConfig


class DeploymentsConfig(AppConfig):
    name = "apps.deployments"
    label = "deployments"

    def ready(self) -> None:
        from apps.workloads.choices import Kind
        from apps.workloads.kinds import KindSpec, register_kind

        from .selectors import deployment_gateway_url

        register_kind(KindSpec(kind=Kind.DEPLOYMENT, serves_port=True, gateway_url=deployment_gateway_url,
                               kubernetes_object="Deployment"))
