"""Ingestion: run tokens, validation (nothing of a bad batch is stored), 413, 429, idempotent batch ids."""
import json
from types import SimpleNamespace

import pytest

from apps.tracking.models import MetricRollup, MetricSummary, Param
from tests.factories import ProjectFactory
from tests.tracking.conftest import batch_url, points
from tests.tracking.factories import run_with_token, stored_points


def _post_raw(client, run, body: bytes):
    return client.generic("POST", batch_url(run), body, content_type="application/json")


def test_run_token_ingests_thousands_of_points_and_params(run_and_token, token_client):
    run, token = run_and_token
    body = {"batch_id": "b-1", "points": points(5000) + points(10, key="acc"), "params": {"lr": 0.01, "opt": "adam"}}
    response = token_client(token).post(batch_url(run), body, format="json")
    assert response.status_code == 200, response.json()
    assert response.json() == {"points": 5010, "params": 2, "duplicate": False}
    assert len(stored_points(run)) == 5010
    summary = MetricSummary.objects.get(run=run, key="loss")
    assert (summary.count, summary.min, summary.max, summary.last_step, summary.last_value) == (5000, 0, 4999, 4999, 4999)
    assert {p.key: p.value for p in Param.objects.filter(run=run)} == {"lr": 0.01, "opt": "adam"}
    assert MetricRollup.objects.filter(run=run, key="loss", level=2).count() == 20  # ceil(5000 / 256)


def test_retried_batch_is_stored_once(run_and_token, token_client):
    run, token = run_and_token
    client = token_client(token)
    body = {"batch_id": "same", "points": points(100)}
    assert client.post(batch_url(run), body, format="json").json()["duplicate"] is False
    second = client.post(batch_url(run), body, format="json")
    assert second.status_code == 200 and second.json()["duplicate"] is True
    assert len(stored_points(run)) == 100
    assert MetricSummary.objects.get(run=run, key="loss").count == 100


def test_batches_merge_summaries_and_rollups(run_and_token, token_client):
    run, token = run_and_token
    client = token_client(token)
    client.post(batch_url(run), {"points": points(10, start=10, value=lambda i: 5.0)}, format="json")
    client.post(batch_url(run), {"points": [{"key": "loss", "step": 3, "value": -7.5},
                                            {"key": "loss", "step": 12, "value": 99.0}]}, format="json")
    summary = MetricSummary.objects.get(run=run, key="loss")
    assert (summary.count, summary.min, summary.max, summary.first_step, summary.last_step) == (12, -7.5, 99.0, 3, 19)
    block = MetricRollup.objects.get(run=run, key="loss", level=2, bucket=0)  # steps 0..255
    assert (block.count, block.first_step, block.first_value, block.min_value, block.max_step, block.max_value) == (
        12, 3, -7.5, -7.5, 12, 99.0)


@pytest.mark.parametrize("body, message", [
    (b'{"points": [{"key": "loss", "step": 1, "value": NaN}]}', "JSON parse error"),
    (b'{"points": [{"key": "loss", "step": 1, "value": Infinity}]}', "JSON parse error"),
    (b'{"points": [{"key": "loss", "step": 1, "value": 1e999}]}', "JSON parse error"),
    (json.dumps({"points": points(3) + [{"key": "loss", "step": 4, "value": "0.5"}]}).encode(), "value must be a number"),
    (json.dumps({"points": points(3) + [{"key": "loss", "step": -1, "value": 1}]}).encode(), "step must be between"),
    (json.dumps({"points": [{"key": "loss", "step": 1.5, "value": 1}]}).encode(), "step must be an integer"),
    (json.dumps({"points": [{"key": "loss", "step": True, "value": 1}]}).encode(), "step must be an integer"),
    (json.dumps({"points": [{"key": "bad key!", "step": 1, "value": 1}]}).encode(), "is invalid"),
    (json.dumps({"points": [{"key": "x" * 300, "step": 1, "value": 1}]}).encode(), "is invalid"),
    (json.dumps({"points": [{"key": "a", "step": 1, "value": 1, "extra": 2}]}).encode(), "unknown field"),
    (json.dumps({"points": [{"key": "a", "step": 1, "value": 1, "time": 1e12}]}).encode(), "Unix timestamp"),
    (json.dumps({"points": [{"key": f"k{i}", "step": 1, "value": 1} for i in range(100_000)]}).encode(),
     "Too many points"),
    (json.dumps({"points": [{"key": f"k{i}", "step": 1, "value": 1} for i in range(1_500)]}).encode(),
     "Too many distinct keys"),
    (json.dumps({"params": {"lr": "a\u0000b"}}).encode(), "NUL"),
    (json.dumps({"params": {"lr": [1, 2]}}).encode(), "string, number, boolean or null"),
    (json.dumps({"points": "nope"}).encode(), "points must be a list"),
    (json.dumps([1, 2]).encode(), "JSON object"),
    (json.dumps({"batch_id": "has space", "points": []}).encode(), "batch_id"),
    (b'{"points": [', "JSON parse error"),
])
def test_malformed_batch_is_rejected_whole(run_and_token, token_client, body, message):
    run, token = run_and_token
    response = _post_raw(token_client(token), run, body)
    assert response.status_code == 400, response.content[:200]
    assert message in response.json()["detail"]
    assert len(stored_points(run)) == 0
    assert not MetricSummary.objects.filter(run=run).exists()
    assert not Param.objects.filter(run=run).exists()


def test_ten_megabyte_body_is_413(run_and_token, token_client):
    run, token = run_and_token
    body = json.dumps({"points": points(1), "params": {"blob": "x" * (10 * 1024 * 1024)}}).encode()
    response = _post_raw(token_client(token), run, body)
    assert response.status_code == 413
    assert "larger than" in response.json()["detail"]
    assert len(stored_points(run)) == 0


def test_ingest_limit_is_its_own(run_and_token, token_client, settings):
    """A 3 MB batch is fine for ingestion although the API's general limit is 2 MB."""
    run, token = run_and_token
    big = [{"key": "a_rather_long_metric_name/for_size", "step": i, "value": i / 7, "time": 1.7e9 + i / 3}
           for i in range(20_000)]
    body = json.dumps({"points": big}).encode()
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE < len(body) < 4 * 1024 * 1024
    assert _post_raw(token_client(token), run, body).status_code == 200


def test_rate_limit_per_token_answers_429(run_and_token, token_client, settings, monkeypatch):
    settings.CAIRN = {**settings.CAIRN, "TRACKING_INGEST_RATE_PER_SECOND": 3}
    # The limit counts per one-second window: hold the throttle's clock inside one, however slow
    # the machine (six requests can otherwise straddle two windows of three).
    monkeypatch.setattr("apps.tracking.throttling.time", SimpleNamespace(time=lambda: 1_900_000_000.25))
    run, token = run_and_token
    client = token_client(token)
    codes = [client.post(batch_url(run), {"points": points(1)}, format="json").status_code for _ in range(6)]
    assert codes == [200, 200, 200, 429, 429, 429]
    other_run, other_token = run_with_token(project=run.project)
    assert token_client(other_token).post(batch_url(other_run), {"points": points(1)}, format="json").status_code == 200
    throttled = client.post(batch_url(run), {"points": points(1)}, format="json")
    assert throttled.status_code == 429
    assert "throttled" in throttled.json()["detail"] and throttled.has_header("Retry-After")


def test_run_token_cannot_write_another_run(run_and_token, token_client):
    run, token = run_and_token
    other, _ = run_with_token(project=run.project)
    response = token_client(token).post(batch_url(other), {"points": points(1)}, format="json")
    assert response.status_code == 404
    assert len(stored_points(other)) == 0


def test_run_token_cannot_write_into_another_project(run_and_token, token_client):
    run, token = run_and_token
    foreign, _ = run_with_token(project=ProjectFactory(slug="other"))
    url = f"/api/v1/projects/other/runs/{foreign.pk}/batches/"
    assert token_client(token).post(url, {"points": points(1)}, format="json").status_code == 404
    url = f"/api/v1/projects/other/runs/{run.pk}/batches/"
    assert token_client(token).post(url, {"points": points(1)}, format="json").status_code == 404


def test_run_token_is_write_only(run_and_token, token_client):
    run, token = run_and_token
    client = token_client(token)
    base = f"/api/v1/projects/{run.project.slug}"
    assert client.get(f"{base}/runs/{run.pk}/series/?key=loss").status_code == 403
    assert client.get(f"{base}/runs/{run.pk}/").status_code == 403
    assert client.get(f"{base}/runs/").status_code == 404  # not its run
    for path in [f"{base}/training-jobs/", "/api/v1/me/", "/api/v1/projects/"]:
        assert client.get(path).status_code == 401, path


def test_bad_or_revoked_run_token_is_401(run_and_token, token_client):
    from apps.tracking.services import run_token_revoke_all

    run, token = run_and_token
    assert token_client(token[:-3] + "xyz").post(batch_url(run), {"points": []}, format="json").status_code == 401
    run_token_revoke_all(run=run)
    response = token_client(token).post(batch_url(run), {"points": []}, format="json")
    assert response.status_code == 401 and "revoked" in response.json()["detail"]


def test_finished_run_refuses_data(run_and_token, token_client):
    run, token = run_and_token
    client = token_client(token)
    url = f"/api/v1/projects/{run.project.slug}/runs/{run.pk}/finish/"
    assert client.post(url, {"status": "finished"}, format="json").status_code == 200
    response = client.post(batch_url(run), {"points": points(1)}, format="json")
    assert response.status_code == 409 and "finished" in response.json()["detail"]


def test_member_ingests_with_own_token_viewer_cannot(project, bob, vera, client_for):
    run, _ = run_with_token(project=project)
    assert client_for(bob).post(batch_url(run), {"points": points(2)}, format="json").status_code == 200
    response = client_for(vera).post(batch_url(run), {"points": points(2)}, format="json")
    assert response.status_code == 403
    assert len(stored_points(run)) == 2


def test_member_of_other_project_cannot_write(project, charlie, client_for):
    run, _ = run_with_token(project=project)
    theirs = ProjectFactory(slug="charlies")
    from tests.factories import MembershipFactory

    MembershipFactory(project=theirs, user=charlie, role="owner")
    assert client_for(charlie).post(batch_url(run), {"points": points(2)}, format="json").status_code == 404
    url = f"/api/v1/projects/charlies/runs/{run.pk}/batches/"
    assert client_for(charlie).post(url, {"points": points(2)}, format="json").status_code == 404
    assert len(stored_points(run)) == 0


def test_batch_ids_are_kept_for_retries_then_pruned_and_dropped_when_the_run_ends(run_and_token, token_client):
    from datetime import timedelta

    from django.utils import timezone

    from apps.tracking.models import IngestBatch
    from apps.tracking.services import run_finish, tracking_prune_batch_ids

    run, token = run_and_token
    client = token_client(token)
    for i in range(3):
        assert client.post(batch_url(run), {"batch_id": f"b-{i}", "points": points(10, start=10 * i)},
                           format="json").status_code == 200
    IngestBatch.objects.filter(batch_id__in=["b-0", "b-1"]).update(created_at=timezone.now() - timedelta(hours=25))
    assert tracking_prune_batch_ids(chunk=1) == 2  # past the 24 h retention, in chunks of one
    assert list(IngestBatch.objects.filter(run=run).values_list("batch_id", flat=True)) == ["b-2"]
    # A recent retry is still acknowledged without storing twice.
    again = client.post(batch_url(run), {"batch_id": "b-2", "points": points(10, start=20)}, format="json")
    assert again.json()["duplicate"] is True and len(stored_points(run)) == 30
    run_finish(run=run)
    assert not IngestBatch.objects.filter(run=run).exists()  # a finished run takes no more batches
    assert len(stored_points(run)) == 30  # the data stays
