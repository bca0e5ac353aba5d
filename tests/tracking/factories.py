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
