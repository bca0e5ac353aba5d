import pytest
from rest_framework.test import APIClient

from tests.tracking.factories import run_with_token


@pytest.fixture
def run_and_token(project):
    return run_with_token(project=project)


@pytest.fixture
def token_client():
    def make(token: str) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        return client

    return make


def batch_url(run) -> str:
    return f"/api/v1/projects/{run.project.slug}/runs/{run.pk}/batches/"


def points(n: int, key: str = "loss", start: int = 0, value=lambda i: float(i)) -> list[dict]:
    return [{"key": key, "step": start + i, "value": value(i)} for i in range(n)]
