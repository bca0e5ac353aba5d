from django.apps import AppConfig


class WorkloadsConfig(AppConfig):
    name = "apps.workloads"
    label = "workloads"

    def ready(self) -> None:
        # The seams the apps below offer (projects and quotas may not import workloads).
        from apps.projects.services import project_delete_checks
        from apps.quotas.selectors import workload_usage_readers
        from apps.quotas.services import quota_delete_checks

        from .selectors import quota_allocated_rows, quota_queued_rows
        from .services import project_has_no_unfinished_workloads, quota_has_no_unfinished_workloads

        project_delete_checks.append(project_has_no_unfinished_workloads)
        quota_delete_checks.append(quota_has_no_unfinished_workloads)
        workload_usage_readers["allocated"] = quota_allocated_rows
        workload_usage_readers["queued"] = quota_queued_rows

        from .topics import register_topics  # the live topics workloads owns (apps.core.live)

        register_topics()
