"""Inputs an outside probe turned into 500s (issue 22, item 6): each is now a 4xx with a `detail`
that says what is wrong and where, and nothing is stored."""
import json
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from apps.core.parsers import MAX_DEPTH
from apps.tracking.models import Param, Run
from apps.workloads.models import Workload
from tests.factories import WorkloadFactory

JOBS = "/api/v1/projects/vision/training-jobs/"
RUNS = "/api/v1/projects/vision/runs/"


@pytest.fixture
def client(alice, quota, client_for):
    return client_for(alice)


def post_raw(client, url, raw: bytes | str):
    return client.generic("POST", url, raw, content_type="application/json")


def nested(depth: int) -> str:
    return '{"command": "true", "env": ' + '{"a": ' * (depth - 1) + "{}" + "}" * (depth - 1) + "}"


# ---- nesting -----------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 330, 5_000, 200_000])
def test_deeply_nested_json_is_400(client, depth):
    response = post_raw(client, JOBS, nested(depth))
    assert response.status_code == 400, response.content
    assert "nested too deeply" in response.json()["detail"]
    assert not Workload.objects.exists()


def test_nesting_up_to_the_limit_is_parsed():
    """The walk checks depth without recursing: a document at the limit is accepted by the parser."""
    from io import BytesIO

    from apps.core.parsers import StrictJSONParser

    document = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    data = StrictJSONParser().parse(BytesIO(document.encode()))
    for _ in range(MAX_DEPTH - 1):
        data = data[0]
    assert data == []


def test_anonymous_login_with_a_deep_body_is_400(db):
    """The probe's 689-byte body nested ~340 levels, enough under a server's deeper stack; this
    one nests 600 so it fails without the fix under the test client too."""
    body = '{"username": ' + "[" * 600 + "]" * 600 + ', "password": "x"}'
    response = post_raw(APIClient(), "/api/v1/auth/login/", body)
    assert response.status_code == 400, response.content
    assert response.json()["detail"]


# ---- NUL characters and lone surrogates in bodies ---------------------------------------------

@pytest.mark.parametrize(("raw", "where"), [
    (r'{"command": "echo \ud800"}', "command"),
    (r'{"command": ["python", "train.py", "\udfff"]}', "command[2]"),
    (r'{"command": "true", "env": {"A": "x\ud83d"}}', "env.A"),
    (r'{"command": "true", "env": {"A\ud800": "1"}}', "env."),
    (r'{"command": "a\u0000b"}', "command"),
])
def test_lone_surrogates_and_nul_in_a_workload_are_400_naming_the_field(client, raw, where):
    response = post_raw(client, JOBS, raw)
    assert response.status_code == 400, response.content
    detail = response.json()["detail"]
    assert detail.startswith(where) and ("surrogate" in detail or "NUL" in detail), detail
    assert not Workload.objects.exists()


def test_a_surrogate_pair_is_fine(client):
    response = post_raw(client, JOBS, r'{"command": "echo \ud83d\ude00"}')
    assert response.status_code == 201, response.content
    assert Workload.objects.get().spec["command"][-1] == "echo \N{GRINNING FACE}"


@pytest.mark.parametrize(("raw", "where"), [
    (r'{"name": "r", "params": {"lr": "\ud800"}}', "params.lr"),
    (r'{"name": "r", "params": {"opt": {"betas": ["\udc00"]}}}', "params.opt.betas[0]"),
    (r'{"name": "\ud800"}', "name"),
])
def test_lone_surrogates_in_a_run_are_400_naming_the_field(client, raw, where):
    response = post_raw(client, RUNS, raw)
    assert response.status_code == 400, response.content
    assert response.json()["detail"].startswith(where), response.json()
    assert not Run.objects.exists() and not Param.objects.exists()


# ---- URL path segments and query strings --------------------------------------------------------

@pytest.mark.parametrize("path", [
    "/api/v1/projects/pro%00ja/workloads/",
    "/api/v1/projects/vision%00/training-jobs/",
    "/api/v1/projects/pro%00ja/",
    "/api/v1/pools/lo%00cal/queue/",
    "/api/v1/pools/lo%00cal/",
    "/api/v1/telemetry/nodes/v%00m/",
    "/api/v1/nodes/v%00m/",
    "/api/v1/projects/vision/members/al%00ice/",
    "/api/v1/projects/vision/runs/1%00/",
    "/api/v1/projects/vision/training-jobs/%0a/",
])
def test_nul_in_a_path_segment_is_404(client, pool, path):
    response = client.get(path)
    assert response.status_code == 404, response.content
    assert response.json()["detail"]


def test_nul_in_a_query_parameter_is_400_naming_it(client):
    """A guard, not a fix: every query parameter goes through a form or serializer field that
    already refuses NUL (apps/core/middleware.py says why the middleware leaves them alone)."""
    response = client.get(JOBS + "?name_contains=a%00b")
    assert response.status_code == 400, response.content
    assert response.json()["detail"].startswith("name_contains:")
    response = client.get(f"{RUNS}compare/?runs=1&keys=lo%00ss")
    assert response.status_code == 400 and response.json()["detail"].startswith("keys:")


# ---- date-time filters ------------------------------------------------------------------------

@pytest.mark.parametrize("offset", ["+16:00", "-16:00", "+23:59", "-23:59"])
def test_created_filters_accept_every_rfc3339_offset(client, project, offset):
    """Offsets beyond PostgreSQL's +-15:59 are valid date-times: they are compared as the same
    instant in UTC (they were a 500)."""
    workload = WorkloadFactory(project=project)
    sign = 1 if offset[0] == "+" else -1
    hours, minutes = map(int, offset[1:].split(":"))
    local = (workload.created_at + sign * timedelta(hours=hours, minutes=minutes))
    stamp = local.replace(tzinfo=None).isoformat() + offset
    assert datetime.fromisoformat(stamp) == workload.created_at
    after = client.get(JOBS.replace("training-jobs", "workloads"), {"created_after": stamp})
    before = client.get(JOBS.replace("training-jobs", "workloads"), {"created_before": stamp})
    assert after.status_code == 200 and before.status_code == 200, after.content
    assert [w["id"] for w in after.json()["results"]] == [workload.pk]  # gte: the same instant
    assert before.json()["results"] == []  # lt


@pytest.mark.parametrize("value", ["9999-12-31T23:00:00-05:00", "0001-01-01T01:00:00+05:00", "2026-13-01T00:00:00Z",
                                   "yesterday"])
def test_created_filters_out_of_range_or_invalid_is_400(client, value):
    response = client.get("/api/v1/projects/vision/workloads/", {"created_after": value})
    assert response.status_code == 400, response.content
    assert response.json()["detail"].startswith("created_after:")


def test_created_filters_with_ordinary_offsets_still_work(client, project):
    workload = WorkloadFactory(project=project)
    stamp = (workload.created_at - timedelta(seconds=1)).astimezone(UTC).isoformat()
    response = client.get("/api/v1/projects/vision/workloads/", {"created_after": stamp})
    assert [w["id"] for w in response.json()["results"]] == [workload.pk]


# ---- the body walk is not fooled by big flat documents ----------------------------------------

def test_a_wide_document_is_parsed(client):
    body = {"command": "true", "env": {f"K{i}": "v" * 10 for i in range(150)}}
    response = post_raw(client, JOBS, json.dumps(body))
    assert response.status_code == 201, response.content


# ---- item 7: what the schema says is what the API does -----------------------------------------

@pytest.fixture(scope="module")
def openapi():
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    return json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))


@pytest.mark.parametrize(("component", "field"), [("Workload", "spec"), ("Workload", "conditions"),
                                                  ("Workload", "placement"), ("Node", "labels"),
                                                  ("ApiToken", "scopes")])
def test_json_fields_are_not_documented_as_string_or_number(openapi, component, field):
    """One extend_schema_field call decorated DRF's JSONField class itself, so every JSON field
    of the API was documented as "string or number"; only the memory quantity is that."""
    schema = openapi["components"]["schemas"][component]["properties"][field]
    assert "oneOf" not in schema and schema.get("type") not in ("string", "number"), schema
    memory = openapi["components"]["schemas"]["ResourcesRequest"]["properties"]["memory"]
    assert memory["oneOf"] == [{"type": "string", "example": "4Gi"}, {"type": "number"}]


def test_nullable_relations_are_documented_nullable(openapi):
    run = openapi["components"]["schemas"]["Run"]["properties"]
    assert run["workload"].get("nullable") is True  # a standalone run has none
    assert run["created_by"].get("nullable") is True
    assert openapi["components"]["schemas"]["Workload"]["properties"]["created_by"].get("nullable") is True


def test_standalone_run_answers_a_null_workload(client):
    response = client.post(RUNS, {"name": "r"}, format="json")
    assert response.status_code == 201 and response.json()["workload"] is None


@pytest.mark.parametrize("page", ["0", "-1", "abc", "1.5", "٣"])
def test_a_page_that_is_not_a_number_from_1_is_400(client, page):
    response = client.get("/api/v1/projects/vision/workloads/", {"page": page})
    assert response.status_code == 400, response.content
    assert response.json()["detail"] == "page: Give a page number from 1."


def test_a_page_past_the_last_is_404_and_both_are_documented(client, openapi):
    response = client.get("/api/v1/projects/vision/workloads/", {"page": "2"})
    assert response.status_code == 404 and response.json()["detail"]
    assert client.get("/api/v1/projects/vision/workloads/", {"page": "9" * 40}).status_code == 404
    operation = openapi["paths"]["/api/v1/projects/{project}/workloads/"]["get"]
    page = next(p for p in operation["parameters"] if p["name"] == "page")
    assert page["schema"] == {"type": "integer", "minimum": 1}
    assert {"400", "404"} <= set(operation["responses"])
    assert operation["responses"]["400"]["content"]["application/json"]["schema"]["$ref"].endswith("/Detail")


@pytest.mark.parametrize("client_id", [False, True, 0, 42, 1.5, ["x"], {"a": 1}, "not-a-uuid"])
def test_client_id_must_be_a_uuid_string(client, client_id):
    response = client.post(RUNS, {"name": "r", "client_id": client_id}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["detail"].startswith("client_id:")
    assert not Run.objects.exists()


def test_client_id_as_a_uuid_string_is_kept(client):
    client_id = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
    response = client.post(RUNS, {"name": "r", "client_id": client_id}, format="json")
    assert response.status_code == 201 and response.json()["client_id"] == client_id
    again = client.post(RUNS, {"name": "r", "client_id": client_id}, format="json")
    assert again.status_code == 200 and again.json()["id"] == response.json()["id"]


def test_unknown_api_urls_answer_json_404(client):
    for path in ["/api/v1/no-such-thing/", "/api/v1/tokens/0.5/", "/api/v1/projects/vision/members/%C2%84/"]:
        response = client.get(path)
        assert response.status_code == 404 and response["Content-Type"] == "application/json", path
        assert response.json()["detail"]


# ---- the ingestion endpoint's own parser (orjson) ------------------------------------------------

@pytest.mark.parametrize("raw", [
    '{"points": ' + "[" * 2000 + "]" * 2000 + "}",
    r'{"points": [], "params": {"lr": "\ud800"}}',
    r'{"points": [{"key": "lo\ud800ss", "step": 1, "value": 1.0}]}',
    r'{"points": [], "params": {"lr": "a\u0000b"}}',
    r'{"points": [{"key": "lo\u0000ss", "step": 1, "value": 1.0}]}',
    r'{"points": [], "batch_id": "a\u0000"}',
])
def test_ingestion_refuses_deep_json_surrogates_and_nul(project, raw):
    """A guard (these were already 400s): orjson refuses nesting past 1,024 levels and unpaired
    surrogates, and validation.parse_batch refuses NUL in keys, params and batch ids."""
    from apps.tracking.models import MetricChunk
    from tests.tracking.factories import run_with_token

    run, token = run_with_token(project=project)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = post_raw(client, f"/api/v1/projects/{project.slug}/runs/{run.pk}/batches/", raw)
    assert response.status_code == 400, response.content
    assert response.json()["detail"]
    assert not MetricChunk.objects.exists() and not Param.objects.exists()


@pytest.mark.parametrize(("header", "value"), [
    ("HTTP_AUTHORIZATION", "Bearer cairn_ab\x00c_secret"),
    ("HTTP_AUTHORIZATION", "Bearer cairnrun_ab\x00c_secret"),
    ("HTTP_COOKIE", "sessionid=abcdefgh\x00ijkl"),
])
@pytest.mark.parametrize("method_path", [("GET", "/api/v1/me/"), ("POST", "/api/v1/projects/vision/runs/1/batches/"),
                                         ("POST", "/api/v1/auth/login/")])
def test_nul_in_a_credential_header_is_400(db, header, value, method_path):
    """The token prefix and the session key are looked up in PostgreSQL: a NUL there was a 500
    (most HTTP servers refuse such headers before Django; the test client does not)."""
    method, path = method_path
    response = APIClient().generic(method, path, "{}", content_type="application/json", **{header: value})
    assert response.status_code == 400, response.content
    assert "must not contain NUL" in response.json()["detail"]
