from django.apps import AppConfig


class TrainingConfig(AppConfig):
    name = "apps.training"
    label = "training"

    def ready(self) -> None:
        from apps.workloads.choices import Kind
        from apps.workloads.kinds import KindSpec, register_kind

        register_kind(KindSpec(kind=Kind.TRAINING, runs_to_completion=True, kubernetes_object="Job"))
