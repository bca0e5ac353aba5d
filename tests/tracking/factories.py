"""Factories of tracking rows (kept beside the tracking tests)."""
import factory

from apps.tracking.models import Run
from apps.tracking.services import run_token_create
from tests.factories import ProjectFactory


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Run

    project = factory.SubFactory(ProjectFactory)
    name = factory.Sequence(lambda n: f"run-{n}")


def run_with_token(**fields) -> tuple[Run, str]:
    run = RunFactory(**fields)
    return run, run_token_create(run=run)


def stored_points(run, key: str | None = None) -> list[tuple[str, int, float]]:
    """Every stored point of the run (or of one key) as (key, step, value), in storage order."""
    from apps.tracking.models import MetricChunk
    from apps.tracking.points import decode

    chunks = MetricChunk.objects.filter(run=run).order_by("key", "id")
    if key is not None:
        chunks = chunks.filter(key=key)
    out = []
    for chunk_key, *columns in chunks.values_list("key", "id", "step_data", "value_data", "time_data"):
        decoded = decode([columns])
        out.extend((chunk_key, s, v) for s, v in zip(decoded.steps.tolist(), decoded.values.tolist(), strict=True))
    return out
