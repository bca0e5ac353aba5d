from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    name = "apps.workloads"
    label = "workloads"

    def ready(self) -> None:
        # The seams the apps below offer (projects and quotas may not import workloads).
        from apps.projects.services import project_delete_checks
        from apps.quotas.selectors import workload_usage_readers
        from apps.quotas.services import quota_delete_checks
        from apps.storage.services import dataset_delete_checks, model_delete_checks, volume_delete_checks

        from .selectors import quota_allocated_rows, quota_queued_rows
        from .services import (
            dataset_not_mounted_by_unfinished_workloads,
            model_not_served_by_unfinished_workloads,
            project_has_no_unfinished_workloads,
            quota_has_no_unfinished_workloads,
            volume_not_mounted_by_unfinished_workloads,
        )

        project_delete_checks.append(project_has_no_unfinished_workloads)
        quota_delete_checks.append(quota_has_no_unfinished_workloads)
        volume_delete_checks.append(volume_not_mounted_by_unfinished_workloads)
        model_delete_checks.append(model_not_served_by_unfinished_workloads)
        dataset_delete_checks.append(dataset_not_mounted_by_unfinished_workloads)
        workload_usage_readers["allocated"] = quota_allocated_rows
        workload_usage_readers["queued"] = quota_queued_rows

        from .topics import register_topics  # the live topics workloads owns (apps.core.live)

        register_topics()
