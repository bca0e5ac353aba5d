
from datetime import UTC, datetime

import django.db.models.deletion
from django.db import migrations, models

FLAGS = ("preempted", "preempted_by", "deadline_exceeded", "server_shutdown", "term_sent_at", "kill_sent_at")


def _when(value):
    return datetime.fromtimestamp(value, tz=UTC) if isinstance(value, int | float) else None


def copy_runtime_flags(apps, schema_editor):
    """The stop flags used to be keys of `runtime`: copy them into the typed fields, drop the keys."""
    Workload = apps.get_model("workloads", "Workload")
    existing = set(Workload.objects.values_list("pk", flat=True))
    for workload in Workload.objects.filter(runtime__has_any_keys=list(FLAGS)).iterator():
        runtime = dict(workload.runtime)
        if runtime.get("preempted"):
            workload.stop_cause = "preempted"
        elif runtime.get("deadline_exceeded"):
            workload.stop_cause = "deadline"
        elif runtime.get("server_shutdown"):
            workload.stop_cause = "shutdown"
        preempted_by = runtime.get("preempted_by")
        workload.preempted_by_id = preempted_by if preempted_by in existing else None
        workload.term_sent_at = _when(runtime.get("term_sent_at"))
        workload.kill_sent_at = _when(runtime.get("kill_sent_at"))
        workload.runtime = {k: v for k, v in runtime.items() if k not in FLAGS}
        workload.save(update_fields=["stop_cause", "preempted_by", "term_sent_at", "kill_sent_at", "runtime"])


class Migration(migrations.Migration):

    dependencies = [
        ('workloads', '0004_waiting_on'),
    ]

    operations = [
        migrations.AddField(
            model_name='workload',
            name='kill_sent_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='workload',
            name='preempted_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='workloads.workload'),
        ),
        migrations.AddField(
            model_name='workload',
            name='stop_cause',
            field=models.CharField(blank=True, choices=[('', 'None'), ('user', 'Stopped by a user'), ('preempted', 'Preempted by the scheduler (requeued once its replicas exit)'), ('deadline', 'Reached its run-time limit (fails once its replicas exit)'), ('shutdown', 'The embedded Cairn server is shutting down')], default='', max_length=16),
        ),
        migrations.AddField(
            model_name='workload',
            name='term_sent_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(copy_runtime_flags, migrations.RunPython.noop),
    ]
