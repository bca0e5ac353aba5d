from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "apps.scheduling"
    label = "scheduling"

    def ready(self) -> None:
        from apps.quotas.selectors import wait_kind_labels  # the seam quotas offers (its admin's words)
        from apps.workloads.api.serializers import node_fit_refusal  # submission refuses what never fits

        from . import checks  # noqa: F401  (registers the settings checks)
        from .policy import WAIT_KIND_LABELS, largest_node_refusal

        wait_kind_labels.update(WAIT_KIND_LABELS)
        node_fit_refusal["largest_node"] = largest_node_refusal
