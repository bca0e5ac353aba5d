from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "apps.telemetry"
    label = "telemetry"

    def ready(self) -> None:
        # Django requires these imports here: they load models.
        from apps.deployments.metrics import register_sink, register_window_reader
        from apps.notebooks.services import gpu_utilisation_readers

        from .selectors import serve_concurrency_window, workload_gpu_utilisation
        from .services import telemetry_record_serving
        from .topics import register_topics  # the live topics telemetry owns (apps.core.live)

        register_topics()
        # The gateway's request metrics are stored with the telemetry (apps/deployments/metrics.py).
        register_sink(lambda samples: telemetry_record_serving(samples=samples))
        register_window_reader(serve_concurrency_window)  # the autoscaler's input
        # The notebooks' idle culler keeps a notebook whose GPUs are busy (apps/notebooks/culling.py).
        if workload_gpu_utilisation not in gpu_utilisation_readers:
            gpu_utilisation_readers.append(workload_gpu_utilisation)
