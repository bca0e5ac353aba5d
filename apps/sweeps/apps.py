from django.apps import AppConfig
from django.db.models.signals import post_delete


class SweepsConfig(AppConfig):
    name = "apps.sweeps"
    label = "sweeps"

    def ready(self) -> None:
        # The seams of the apps below: each trial's attempt gets its params (env + run params),
        # a trial stopped by pruning ends STOPPED with reason Pruned, and a project whose sweeps
        # still run is not deleted.
        from apps.backends.launch_env import attempt_env_providers
        from apps.projects.services import project_delete_checks
        from apps.workloads.lifecycle import kept_stop_reasons

        from .choices import PRUNED_REASON
        from .models import Sweep
        from .services import project_has_no_running_sweeps, sweep_study_forget, trial_env_for_attempt
        from .topics import register_topics  # the live topics sweeps owns (apps.core.live); needs models

        attempt_env_providers.append(trial_env_for_attempt)
        kept_stop_reasons.add(PRUNED_REASON)
        project_delete_checks.append(project_has_no_running_sweeps)
        register_topics()
        # Optuna's study lives in its own tables, which no foreign key ties to the sweep's row.
        post_delete.connect(lambda sender, instance, **kw: sweep_study_forget(study_name=instance.study_name),
                            sender=Sweep, weak=False, dispatch_uid="sweeps.study_forget")
