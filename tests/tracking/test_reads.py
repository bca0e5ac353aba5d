"""Reads on real PostgreSQL: downsampled series keep spikes, zoom by step and time, full-resolution
paging, multi-run comparison and CSV export; members read, outsiders get 404."""
import csv
import io
import random
import time

from apps.tracking.services import run_ingest
from apps.tracking.validation import Batch
from tests.factories import MembershipFactory, ProjectFactory
from tests.tracking.factories import RunFactory

T0 = 1_750_000_000.0


def _ingest(run, pts, params=None, size=20_000):
    for start in range(0, len(pts), size):
        run_ingest(run=run, batch=Batch(batch_id=None, points=pts[start:start + size], params=params or {}))


def _url(run, tail=""):
    return f"/api/v1/projects/{run.project.slug}/runs/{run.pk}/{tail}"


def test_series_downsampled_keeps_every_spike(project, vera, client_for):
    run = RunFactory(project=project)
    rng = random.Random(5)
    n = 60_000
    spikes = {rng.randrange(k * 2400 + 800, k * 2400 + 2000) for k in range(25)}  # one per chart bucket
    values = {i: (1000.0 + i if i in spikes else rng.uniform(-1, 1)) for i in range(n)}
    values[777] = -500.0  # a negative spike too
    _ingest(run, [("loss", i, values[i], T0 + i) for i in range(n)])
    response = client_for(vera).get(_url(run, "series/"), {"key": "loss", "max_points": 1000})
    assert response.status_code == 200
    body = response.json()
    assert body["downsampled"] is True and body["count"] == n
    assert len(body["points"]) <= 1000
    returned = {step for step, _ in body["points"]}
    assert spikes <= returned and 777 in returned
    for bucket in body["buckets"]:
        inside = [values[i] for i in range(bucket["start"], bucket["end"] + 1)]
        assert bucket["max"][1] == max(inside) and bucket["min"][1] == min(inside)
        assert bucket["first"] == [bucket["start"], values[bucket["start"]]]
        assert bucket["last"] == [bucket["end"], values[bucket["end"]]]


def test_series_zoom_by_step_and_time(project, alice, client_for):
    run = RunFactory(project=project)
    _ingest(run, [("acc", i, i / 10, T0 + i) for i in range(5000)])
    client = client_for(alice)
    body = client.get(_url(run, "series/"), {"key": "acc", "step_min": 1000, "step_max": 1099}).json()
    assert body["downsampled"] is False and [p[0] for p in body["points"]] == list(range(1000, 1100))
    body = client.get(_url(run, "series/"), {"key": "acc", "step_min": 1003, "step_max": 4097, "max_points": 100}).json()
    assert body["downsampled"] and body["buckets"][0]["start"] == 1003 and body["buckets"][-1]["end"] == 4097
    assert sum(b["count"] for b in body["buckets"]) == 3095
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0 + 4990))
    body = client.get(_url(run, "series/"), {"key": "acc", "time_min": since}).json()
    assert [p[0] for p in body["points"]] == list(range(4990, 5000))
    assert client.get(_url(run, "series/"), {"key": "nope"}).json()["points"] == []


def test_series_bad_query_is_400(project, alice, client_for):
    run = RunFactory(project=project)
    client = client_for(alice)
    for query in [{}, {"key": "loss", "max_points": 2}, {"key": "a b"}, {"key": "loss", "step_min": -1},
                  {"key": "loss", "bogus": 1}]:
        response = client.get(_url(run, "series/"), query)
        assert response.status_code == 400 and response.json()["detail"], query


def test_full_resolution_paging(project, alice, client_for):
    run = RunFactory(project=project)
    pts = [("loss", i // 2, float(i), T0 + i) for i in range(2500)]  # two points per step
    _ingest(run, pts)
    client = client_for(alice)
    got, query = [], {"key": "loss", "limit": 1000}
    while True:
        body = client.get(_url(run, "points/"), query).json()
        got += body["points"]
        if not body["next"]:
            break
        query = {"key": "loss", "limit": 1000, **body["next"]}
    assert [p[1] for p in got] == [float(i) for i in range(2500)]


def test_paging_and_export_merge_overlapping_batches(project, alice, client_for):
    """Batches whose steps overlap and repeat: every read orders by step, then by arrival."""
    from apps.tracking.selectors import ordered_points

    run = RunFactory(project=project)
    rng = random.Random(3)
    batches = [[("loss", rng.randrange(0, 400), float(b * 1000 + i), T0 + i) for i in range(60)] for b in range(25)]
    for pts in batches:
        _ingest(run, pts)
    expected = [v for _, _, _, v in sorted((s, b, i, v) for b, pts in enumerate(batches)
                                           for i, (_, s, v, _) in enumerate(pts))]
    streamed = [v for part in ordered_points(run=run, key="loss", want=70) for v in part.values.tolist()]
    assert streamed == expected
    client = client_for(alice)
    got, query = [], {"key": "loss", "limit": 37}
    while True:
        body = client.get(_url(run, "points/"), query).json()
        got += body["points"]
        if not body["next"]:
            break
        query = {"key": "loss", "limit": 37, **body["next"]}
    assert [p[1] for p in got] == expected
    rows = list(csv.reader(io.StringIO(b"".join(client.get(_url(run, "export/")).streaming_content).decode())))
    assert [float(r[2]) for r in rows[1:]] == expected
    series = client.get(_url(run, "series/"), {"key": "loss", "max_points": 5000}).json()
    assert series["downsampled"] is False and [p[1] for p in series["points"]] == expected


def test_compare_runs(project, bob, client_for):
    a, b, c = (RunFactory(project=project, name=n) for n in ("a", "b", "c"))
    _ingest(a, [("loss", i, 1.0 / (i + 1), T0) for i in range(100)], {"lr": 0.1, "opt": "adam", "seed": 1})
    _ingest(b, [("loss", i, 2.0 / (i + 1), T0) for i in range(50)], {"lr": 0.01, "opt": "adam", "seed": 1})
    _ingest(c, [("acc", 0, 0.5, T0)], {"lr": 0.01, "opt": "adam", "seed": 1})
    client = client_for(bob)
    ids = f"{a.pk},{b.pk},{c.pk}"
    body = client.get(f"/api/v1/projects/{project.slug}/runs/compare/", {"runs": ids, "only_differs": "true",
                                                                         "keys": "loss"}).json()
    assert body["params"]["keys"] == ["lr"]
    assert [row["params"] for row in body["params"]["rows"]] == [{"lr": 0.1}, {"lr": 0.01}, {"lr": 0.01}]
    assert body["summaries"][str(a.pk)]["loss"]["last"] == 0.01
    assert body["summaries"][str(b.pk)]["loss"]["min"] == 2.0 / 50
    dims = [d["name"] for d in body["parallel_coordinates"]["dimensions"]]
    assert dims == ["lr", "acc", "loss"]
    assert body["parallel_coordinates"]["lines"][2]["values"] == [0.01, 0.5, None]
    assert len(body["curves"]["loss"][str(a.pk)]) == 100 and body["curves"]["loss"][str(c.pk)] == []
    full = client.get(f"/api/v1/projects/{project.slug}/runs/compare/", {"runs": ids}).json()
    assert full["params"]["keys"] == ["lr", "opt", "seed"]


def test_compare_with_foreign_run_is_404(project, alice, client_for):
    mine = RunFactory(project=project)
    theirs = RunFactory(project=ProjectFactory(slug="other"))
    response = client_for(alice).get(f"/api/v1/projects/{project.slug}/runs/compare/",
                                     {"runs": f"{mine.pk},{theirs.pk}"})
    assert response.status_code == 404 and str(theirs.pk) in response.json()["detail"]


def test_csv_export(project, vera, client_for):
    run = RunFactory(project=project)
    _ingest(run, [("loss", i, i * 0.5, T0 + i) for i in range(3)] + [("acc", 0, 0.1, T0)])
    response = client_for(vera).get(_url(run, "export/"))
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0] == ["key", "step", "value", "time"]
    assert [r[:3] for r in rows[1:]] == [["acc", "0", "0.1"], ["loss", "0", "0.0"], ["loss", "1", "0.5"],
                                         ["loss", "2", "1.0"]]
    only = client_for(vera).get(_url(run, "export/"), {"keys": "acc"})
    assert len(b"".join(only.streaming_content).decode().strip().splitlines()) == 2


def test_runs_list_and_detail(project, vera, client_for, django_assert_max_num_queries):
    for i in range(5):
        run = RunFactory(project=project)
        _ingest(run, [("loss", 0, float(i), T0), ("acc", 0, 1.0, T0)], {"i": i})
    client = client_for(vera)
    with django_assert_max_num_queries(8):
        body = client.get(f"/api/v1/projects/{project.slug}/runs/").json()
    assert body["count"] == 5 and set(body["results"][0]["summaries"]) == {"acc", "loss"}
    detail = client.get(_url(run)).json()
    assert detail["params"] == {"i": 4} and detail["summaries"]["loss"]["last"] == 4.0


def test_outsider_cannot_read_runs(project, charlie, client_for):
    run = RunFactory(project=project)
    _ingest(run, [("loss", 0, 1.0, T0)])
    theirs = ProjectFactory(slug="charlies")
    MembershipFactory(project=theirs, user=charlie, role="owner")
    client = client_for(charlie)
    for tail in ["", "series/?key=loss", "points/?key=loss", "export/"]:
        assert client.get(_url(run, tail)).status_code == 404
        assert client.get(f"/api/v1/projects/charlies/runs/{run.pk}/{tail}").status_code == 404


def test_create_standalone_run_is_idempotent_and_returns_token(project, bob, client_for, token_client):
    client = client_for(bob)
    body = {"name": "sweep-1", "client_id": "0b8f3d4e-1c2a-4b5c-9d6e-7f8091a2b3c4", "params": {"lr": 0.1}}
    first = client.post(f"/api/v1/projects/{project.slug}/runs/", body, format="json")
    assert first.status_code == 201 and first.json()["run_token"].startswith("cairnrun_")
    again = client.post(f"/api/v1/projects/{project.slug}/runs/", body, format="json")
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    run_id = first.json()["id"]
    url = f"/api/v1/projects/{project.slug}/runs/{run_id}/batches/"
    assert token_client(again.json()["run_token"]).post(url, {"points": [{"key": "x", "step": 0, "value": 1}]},
                                                         format="json").status_code == 200
    bad = client.post(f"/api/v1/projects/{project.slug}/runs/", {"nme": "typo"}, format="json")
    assert bad.status_code == 400 and "nme" in bad.json()["detail"]
