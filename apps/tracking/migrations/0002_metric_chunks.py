"""Points move from one row each (MetricPoint) to one row per key and batch (MetricChunk).

Existing points are packed into chunks of up to 4,096 points per key, in (step, id) order, so
reads answer exactly what they answered before. Level-1 rollups are dropped. On PostgreSQL the packed columns are stored
uncompressed (random floats do not compress; trying costs ingestion time)."""
import django.db.models.deletion
import numpy as np
from django.db import migrations, models

PIECE = 4096


def points_to_chunks(apps, schema_editor):
    MetricPoint = apps.get_model("tracking", "MetricPoint")
    MetricChunk = apps.get_model("tracking", "MetricChunk")
    series = MetricPoint.objects.values_list("run_id", "key").distinct().order_by("run_id", "key")
    for run_id, key in series.iterator():
        rows = MetricPoint.objects.filter(run_id=run_id, key=key).order_by("step", "id").values_list(
            "step", "value", "time")
        piece: list = []
        for row in rows.iterator(chunk_size=PIECE):
            piece.append(row)
            if len(piece) == PIECE:
                _store(MetricChunk, run_id, key, piece)
                piece = []
        if piece:
            _store(MetricChunk, run_id, key, piece)


def _store(MetricChunk, run_id, key, piece):
    steps = np.array([r[0] for r in piece], dtype="<i8")
    MetricChunk.objects.create(
        run_id=run_id, key=key, first_step=int(steps[0]), last_step=int(steps[-1]), count=len(piece),
        step_data=steps.tobytes(), value_data=np.array([r[1] for r in piece], dtype="<f8").tobytes(),
        time_data=np.array([r[2].timestamp() for r in piece], dtype="<f8").tobytes())


def chunks_to_points(apps, schema_editor):
    from datetime import UTC, datetime

    MetricPoint = apps.get_model("tracking", "MetricPoint")
    MetricChunk = apps.get_model("tracking", "MetricChunk")
    for chunk in MetricChunk.objects.order_by("id").iterator():
        steps = np.frombuffer(bytes(chunk.step_data), dtype="<i8").tolist()
        values = np.frombuffer(bytes(chunk.value_data), dtype="<f8").tolist()
        times = np.frombuffer(bytes(chunk.time_data), dtype="<f8").tolist()
        MetricPoint.objects.bulk_create([
            MetricPoint(run_id=chunk.run_id, key=chunk.key, step=s, value=v, time=datetime.fromtimestamp(t, tz=UTC))
            for s, v, t in zip(steps, values, times, strict=True)
        ], batch_size=2000)


def drop_level_one_rollups(apps, schema_editor):
    """Rollups start at level 2 (256 steps) now: shorter ranges decode raw chunks instead.
    (Going back to 0001 leaves level-1 blocks missing: charts of short ranges would be empty.)"""
    apps.get_model("tracking", "MetricRollup").objects.filter(level__lt=2).delete()


def uncompressed_storage(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for column in ("step_data", "value_data", "time_data"):
            schema_editor.execute(f"ALTER TABLE tracking_metricchunk ALTER COLUMN {column} SET STORAGE EXTERNAL")


class Migration(migrations.Migration):

    dependencies = [
        ('tracking', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='MetricChunk',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('key', models.CharField(max_length=200)),
                ('first_step', models.BigIntegerField()),
                ('last_step', models.BigIntegerField()),
                ('count', models.PositiveIntegerField()),
                ('step_data', models.BinaryField()),
                ('value_data', models.BinaryField()),
                ('time_data', models.BinaryField()),
                ('run', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+',
                                          to='tracking.run')),
            ],
        ),
        migrations.AddIndex(
            model_name='metricchunk',
            index=models.Index(fields=['run', 'key', 'last_step', 'first_step'], name='metricchunk_run_key_last'),
        ),
        migrations.RunPython(uncompressed_storage, migrations.RunPython.noop),
        migrations.RunPython(points_to_chunks, chunks_to_points),
        migrations.RunPython(drop_level_one_rollups, migrations.RunPython.noop),
        migrations.DeleteModel(
            name='MetricPoint',
        ),
    ]
