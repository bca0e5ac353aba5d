"""Idempotent creation (issue 25, item 5): a create retried with the same `Idempotency-Key` gets
the first answer again, never a second object; the same key for another request is a 422."""
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from apps.projects.models import IdempotencyKey
from apps.projects.services import idempotency_keys_prune
from apps.workloads.models import Workload
from tests.factories import ProjectFactory, QuotaFactory

JOB = {"name": "train", "command": "true", "resources": {"gpu": 0, "cpu": 1}}


def _url(project) -> str:
    return f"/api/v1/projects/{project.slug}/training-jobs/"


@pytest.fixture
def ready(quota, alice, bob):
    return quota.project


def test_a_retry_with_the_same_key_returns_the_same_workload(ready, alice, client_for):
    client = client_for(alice)
    first = client.post(_url(ready), JOB, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = client.post(_url(ready), JOB, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == again.status_code == 201, first.content
    assert again.json()["id"] == first.json()["id"] and again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert Workload.objects.filter(project=ready).count() == 1


def test_without_a_key_each_create_is_new(ready, alice, client_for):
    client = client_for(alice)
    assert client.post(_url(ready), JOB, format="json").status_code == 201
    second = client.post(_url(ready), {**JOB, "name": "train-2"}, format="json")
    assert second.status_code == 201 and Workload.objects.filter(project=ready).count() == 2


def test_the_same_key_with_another_body_is_a_422(ready, alice, client_for):
    client = client_for(alice)
    assert client.post(_url(ready), JOB, format="json", HTTP_IDEMPOTENCY_KEY="k-2").status_code == 201
    other = client.post(_url(ready), {**JOB, "name": "other"}, format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    assert other.status_code == 422
    assert "already used" in other.json()["detail"] and "k-2" in other.json()["detail"]
    # another route with the same key is another request too
    notebook = client.post(f"/api/v1/projects/{ready.slug}/notebooks/", {"name": "nb"}, format="json",
                           HTTP_IDEMPOTENCY_KEY="k-2")
    assert notebook.status_code == 422
    assert Workload.objects.filter(project=ready).count() == 1


def test_another_member_reusing_a_key_is_a_422_not_the_first_answer(ready, alice, bob, client_for):
    assert client_for(alice).post(_url(ready), JOB, format="json", HTTP_IDEMPOTENCY_KEY="k-3").status_code == 201
    reused = client_for(bob).post(_url(ready), JOB, format="json", HTTP_IDEMPOTENCY_KEY="k-3")
    assert reused.status_code == 422 and "detail" in reused.json()


def test_outsiders_and_viewers_are_refused_before_the_key_is_looked_at(ready, alice, vera, charlie, client_for):
    assert client_for(alice).post(_url(ready), JOB, format="json", HTTP_IDEMPOTENCY_KEY="k-4").status_code == 201
    assert client_for(charlie).post(_url(ready), JOB, format="json", HTTP_IDEMPOTENCY_KEY="k-4").status_code == 404
    assert client_for(vera).post(_url(ready), JOB, format="json", HTTP_IDEMPOTENCY_KEY="k-4").status_code == 403
    assert APIClient().post(_url(ready), JOB, format="json", HTTP_IDEMPOTENCY_KEY="k-4").status_code == 401


def test_keys_are_kept_per_project(ready, alice, client_for, quota):
    other = ProjectFactory(slug="other")
    other.memberships.create(user=alice, role="owner")
    QuotaFactory(project=other, pool=quota.pool)
    client = client_for(alice)
    assert client.post(_url(ready), JOB, format="json", HTTP_IDEMPOTENCY_KEY="same").status_code == 201
    elsewhere = client.post(_url(other), JOB, format="json", HTTP_IDEMPOTENCY_KEY="same")
    assert elsewhere.status_code == 201 and "Idempotent-Replayed" not in elsewhere
    assert Workload.objects.count() == 2


def test_a_failed_create_releases_its_key(ready, alice, client_for):
    client = client_for(alice)
    bad = client.post(_url(ready), {**JOB, "resources": {"gpu": -1}}, format="json", HTTP_IDEMPOTENCY_KEY="k-5")
    assert bad.status_code == 400 and "detail" in bad.json()
    assert not IdempotencyKey.objects.filter(key="k-5").exists()
    fixed = client.post(_url(ready), JOB, format="json", HTTP_IDEMPOTENCY_KEY="k-5")
    assert fixed.status_code == 201 and Workload.objects.filter(project=ready).count() == 1


@pytest.mark.parametrize("key", ["", "x" * 256, "bad\x01key"])
def test_a_malformed_key_is_a_400(ready, alice, client_for, key):
    response = client_for(alice).post(_url(ready), JOB, format="json", HTTP_IDEMPOTENCY_KEY=key)
    assert response.status_code == 400 and "Idempotency-Key" in response.json()["detail"]
    assert not Workload.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_create_one_workload(quota, alice):
    project = quota.project
    answers, barrier = [], threading.Barrier(4)

    def post():
        try:
            client = APIClient()
            client.force_authenticate(user=alice)
            barrier.wait()
            answers.append(client.post(_url(project), JOB, format="json", HTTP_IDEMPOTENCY_KEY="race"))
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(answers) == 4
    assert {a.status_code for a in answers} == {201}, [a.content for a in answers]
    assert len({a.json()["id"] for a in answers}) == 1
    assert Workload.objects.filter(project=project).count() == 1


def test_keys_are_pruned_after_a_day(ready, alice, client_for):
    client_for(alice).post(_url(ready), JOB, format="json", HTTP_IDEMPOTENCY_KEY="old")
    client_for(alice).post(_url(ready), {**JOB, "name": "b"}, format="json", HTTP_IDEMPOTENCY_KEY="new")
    IdempotencyKey.objects.filter(key="old").update(created_at=timezone.now() - timedelta(hours=25))
    assert idempotency_keys_prune() == 1
    assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["new"]


def test_run_creation_stores_no_answer_since_it_holds_a_run_token(ready, alice, client_for):
    url = f"/api/v1/projects/{ready.slug}/runs/"
    response = client_for(alice).post(url, {"name": "r"}, format="json", HTTP_IDEMPOTENCY_KEY="run-1")
    assert response.status_code == 201 and response.json()["run_token"]
    assert not IdempotencyKey.objects.exists()
