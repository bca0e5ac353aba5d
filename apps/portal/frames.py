"""Every frame the live websocket sends (docs/live.md), declared once as a serializer.

The topics live in the apps that own their data (apps.core.live registry); what they send is
declared here, next to the socket that sends it (apps/portal/consumers.py), so that:

- the OpenAPI schema carries a component per frame (`LiveWorkloadStatusFrame`, ...) and their
  union `LiveFrame`, discriminated by `type` (`live_frames_schema_hook`, in
  SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]): the dashboard's types are generated from it
  like the REST types (frontend/src/api/schema.d.ts, `npm run gen:api`);
- the socket checks every frame it sends against its declaration when
  CAIRN["VALIDATE_LIVE_FRAMES"] is on (the tests turn it on: a frame that drifts from its
  declaration fails the test that sent it, `frame_errors`).

Adding a frame: a serializer below, in FRAMES; then regenerate frontend/openapi.json and the types.
"""
from __future__ import annotations

from drf_spectacular.plumbing import ComponentRegistry, build_mocked_view
from drf_spectacular.utils import extend_schema
from rest_framework import serializers

from apps.sweeps.choices import SweepStatus, TrialStatus
from apps.tracking.choices import RunStatus
from apps.workloads.choices import EventType, WorkloadStatus


def _literal(value: str) -> serializers.ChoiceField:
    return serializers.ChoiceField(choices=[(value, value)])


class _Frame(serializers.Serializer):
    """Every frame names its topic (null for an error about no topic) and its type."""
    topic = serializers.CharField(allow_null=True)


# -- acknowledgements ------------------------------------------------------------------------------

class SubscribedFrame(_Frame):
    type = _literal("subscribed")


class UnsubscribedFrame(_Frame):
    type = _literal("unsubscribed")


class ErrorFrame(_Frame):
    type = _literal("error")
    detail = serializers.CharField()


# -- workloads, workload:<id> ----------------------------------------------------------------------

class WorkloadCreatedFrame(_Frame):
    type = _literal("workload.created")
    workload = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.CharField(help_text="A kind GET /api/v1/kinds/ lists.")
    status = serializers.ChoiceField(choices=WorkloadStatus.choices)


class WorkloadStatusFrame(_Frame):
    type = _literal("workload.status")
    workload = serializers.IntegerField()
    status = serializers.ChoiceField(choices=WorkloadStatus.choices)
    reason = serializers.CharField(allow_blank=True)


class WorkloadDeletedFrame(_Frame):
    type = _literal("workload.deleted")
    workload = serializers.IntegerField()


class WorkloadEventFrame(_Frame):
    type = _literal("workload.event")
    workload = serializers.IntegerField()
    reason = serializers.CharField(allow_blank=True)
    message = serializers.CharField(allow_blank=True)
    event_type = serializers.ChoiceField(choices=EventType.choices)
    time = serializers.DateTimeField()


class WorkloadStateFrame(_Frame):
    type = _literal("workload.state")
    workload = serializers.IntegerField()
    status = serializers.ChoiceField(choices=WorkloadStatus.choices)
    status_reason = serializers.CharField(allow_blank=True)
    status_message = serializers.CharField(allow_blank=True)
    pending_reason = serializers.CharField(allow_blank=True)
    waiting_on = serializers.CharField(allow_null=True)
    estimated_start = serializers.DateTimeField(allow_null=True)
    queue_position = serializers.IntegerField(allow_null=True)
    attempt = serializers.IntegerField()
    replicas = serializers.IntegerField()
    preemptions = serializers.IntegerField()
    exit_code = serializers.IntegerField(allow_null=True)
    placement = serializers.ListField(child=serializers.DictField())
    conditions = serializers.ListField(child=serializers.DictField())
    updated_at = serializers.DateTimeField()


class LiveSample(serializers.Serializer):
    """One GPU sample of a workload."""
    node = serializers.CharField()
    gpu = serializers.IntegerField(allow_null=True)
    metric = serializers.CharField()
    value = serializers.FloatField()
    time = serializers.FloatField(help_text="Seconds since the epoch.")


class WorkloadTelemetryFrame(_Frame):
    type = _literal("workload.telemetry")
    workload = serializers.IntegerField()
    samples = LiveSample(many=True)
    dropped = serializers.IntegerField(required=False, help_text="Samples left out for a slow client.")


# -- logs:<id>:<replica> ---------------------------------------------------------------------------

class LogsFrame(_Frame):
    type = _literal("logs")
    attempt = serializers.IntegerField()
    text = serializers.CharField(allow_blank=True, trim_whitespace=False)


class LogsEndFrame(_Frame):
    type = _literal("logs.end")
    status = serializers.CharField(help_text="The workload's final status, or `deleted`.")


# -- run:<id>, runs --------------------------------------------------------------------------------

def _point() -> serializers.ListField:
    return serializers.ListField(child=serializers.FloatField(), min_length=3, max_length=3,
                                 help_text="[step, value, time]")


class RunMetricsFrame(_Frame):
    type = _literal("run.metrics")
    run = serializers.IntegerField(allow_null=True)
    points = serializers.DictField(child=serializers.ListField(child=_point()), help_text="Per key: [step, value, time] rows.")
    dropped = serializers.IntegerField(required=False)


class RunStatusFrame(_Frame):
    type = _literal("run.status")
    run = serializers.IntegerField()
    status = serializers.ChoiceField(choices=RunStatus.choices)


class RunsLatestFrame(_Frame):
    type = _literal("runs.latest")
    runs = serializers.DictField(child=serializers.DictField(child=_point()),
                                 help_text="Per run id: per key, the latest [step, value, time].")
    dropped = serializers.IntegerField(required=False)


# -- cluster ---------------------------------------------------------------------------------------

class ClusterTelemetryFrame(_Frame):
    type = _literal("cluster.telemetry")
    nodes = serializers.ListField(child=serializers.DictField(), help_text=(
        "Per node: node, time, the sampled node fields (cpu_percent, ...) and gpus: per GPU its gpu index, "
        "time and sampled fields (util_percent, memory_used_mb, ...)."))


class LiveNodeChange(serializers.Serializer):
    """A node as a node.changed frame shows it."""
    id = serializers.IntegerField()
    name = serializers.CharField()
    cluster = serializers.CharField()
    pool = serializers.CharField(allow_null=True)
    health = serializers.CharField()
    schedulable = serializers.BooleanField()
    cordoned = serializers.BooleanField()


class NodeChangedFrame(_Frame):
    type = _literal("node.changed")
    node = LiveNodeChange()
    reason = serializers.CharField()
    message = serializers.CharField(allow_blank=True)


# -- sweeps, sweep:<id> ----------------------------------------------------------------------------

class SweepChangedFrame(_Frame):
    type = _literal("sweep.changed")
    sweep = serializers.IntegerField()
    status = serializers.ChoiceField(choices=SweepStatus.choices)


class SweepTrialsFrame(_Frame):
    type = _literal("sweep.trials")
    sweep = serializers.IntegerField()


class SweepTrialFrame(_Frame):
    type = _literal("sweep.trial")
    sweep = serializers.IntegerField()
    trial = serializers.IntegerField()
    status = serializers.ChoiceField(choices=TrialStatus.choices)


class SweepDeletedFrame(_Frame):
    type = _literal("sweep.deleted")
    sweep = serializers.IntegerField()


FRAMES: dict[str, type[_Frame]] = {
    next(iter(cls._declared_fields["type"].choices)): cls
    for cls in (SubscribedFrame, UnsubscribedFrame, ErrorFrame,
                WorkloadCreatedFrame, WorkloadStatusFrame, WorkloadDeletedFrame, WorkloadEventFrame,
                WorkloadStateFrame, WorkloadTelemetryFrame, LogsFrame, LogsEndFrame,
                RunMetricsFrame, RunStatusFrame, RunsLatestFrame, ClusterTelemetryFrame, NodeChangedFrame,
                SweepChangedFrame, SweepTrialsFrame, SweepTrialFrame, SweepDeletedFrame)
}


def component_name(cls: type[serializers.Serializer]) -> str:
    """`WorkloadStatusFrame` -> `LiveWorkloadStatusFrame` (no clash with the REST components)."""
    return f"Live{cls.__name__}"


def frame_errors(frame: dict) -> list[str]:
    """What is wrong with `frame` against its declaration ([] when it is as declared): an unknown
    type, a missing or malformed field, a field no declaration names."""
    if not isinstance(frame, dict) or frame.get("type") not in FRAMES:
        return [f"Unknown frame type {frame.get('type') if isinstance(frame, dict) else frame!r}."]
    serializer = FRAMES[frame["type"]](data=frame)
    errors = [] if serializer.is_valid() else [f"{field}: {error}" for field, error in serializer.errors.items()]
    extra = set(frame) - set(serializer.fields)
    return errors + [f"{key}: not declared" for key in sorted(extra)]


def live_frames_schema_hook(result, generator, request, public):
    """drf-spectacular postprocessing hook: a component per frame, and `LiveFrame`, their union
    discriminated by `type`. Runs after the enum hook, so the frames' enums stay inline."""
    registry = ComponentRegistry()
    view = build_mocked_view(method="GET", path="/", extend_schema_decorator=extend_schema(), registry=registry)
    refs = {}
    for name, cls in FRAMES.items():
        serializer = type(component_name(cls), (cls,), {"__module__": cls.__module__, "__doc__": cls.__doc__})
        refs[name] = view.schema.resolve_serializer(serializer, "response").ref
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for key, schema in registry.build({}).get("schemas", {}).items():
        if key in schemas and schemas[key] != schema:
            raise ValueError(f"The live frame component {key} clashes with a REST component of that name.")
        schemas[key] = schema
    schemas["LiveFrame"] = {
        "oneOf": list(refs.values()),
        "discriminator": {"propertyName": "type", "mapping": {name: ref["$ref"] for name, ref in refs.items()}},
        "description": "A frame of the live websocket (docs/live.md), by its type.",
    }
    return result
