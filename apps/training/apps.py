from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "apps.training"
    label = "training"

    def ready(self) -> None:
        from apps.workloads.choices import Kind
        from apps.workloads.kinds import KindSpec, register_kind

        from .api.views import TrainingJobViewSet  # the kind's collection, routed by portal from the spec

        register_kind(KindSpec(kind=Kind.TRAINING, route="training-jobs", label=Kind.TRAINING.label,
                               runs_to_completion=True, kubernetes_object="Job", api_viewset=TrainingJobViewSet))
