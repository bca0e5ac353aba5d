"""A schemathesis run over every operation of the OpenAPI schema that takes a date-time (query
parameter or request body field), with date-times drawn from the edges of what Python can hold:
years 1 and 9999, offsets up to +-23:59, date-only values. No answer may be a 5xx, and a 400 is
JSON with a `detail` (issue 44, item 8).

The schema's `format: date-time` is swapped, for these fields only, for a format of this module
(EXTREME), so the rest of each request is generated as schemathesis would. Bounded: MAX_EXAMPLES
per operation (17 operations), derandomized, no example database."""
import copy
import json
from datetime import datetime

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.formats import unregister_string_format

from tests.factories import MembershipFactory, UserFactory, WorkloadFactory, make_token
from tests.tracking.factories import RunFactory

MAX_EXAMPLES = 8
FORMAT = "cairn-extreme-date-time"
OPERATIONS: set[tuple[str, str]] = set()  # those that take a date-time (found by the fixture)

EDGES = [datetime(1, 1, 1), datetime(1, 1, 1, 0, 59, 59), datetime(1, 1, 2), datetime(9999, 12, 31, 23, 59, 59, 999999),
         datetime(9999, 12, 31), datetime(9999, 12, 30, 23, 0), datetime(1970, 1, 1)]
OFFSETS = ["Z", "+00:00", "-23:59", "+23:59", "+00:01", "-00:01", "+15:59", "-16:00", "+14:00", ""]


def _render(moment: datetime, offset: str, date_only: bool) -> str:
    return moment.date().isoformat() if date_only else moment.isoformat() + offset


EXTREME = st.builds(
    _render,
    st.one_of(st.sampled_from(EDGES),
              st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(1, 1, 3)),
              st.datetimes(min_value=datetime(9999, 12, 29), max_value=datetime(9999, 12, 31, 23, 59, 59)),
              st.datetimes()),
    st.sampled_from(OFFSETS), st.booleans())


def _extreme_schema(raw: dict) -> tuple[dict, set[str]]:
    """A copy of the schema whose writable date-time fields use FORMAT and are required (so that
    every example has one), and the operations (method, path) that have one."""
    raw = copy.deepcopy(raw)
    operations = set()
    components = raw["components"]["schemas"]
    for component in components.values():
        for name, field in component.get("properties", {}).items():
            if field.get("format") == "date-time" and not field.get("readOnly"):
                field["format"] = FORMAT
                component["required"] = sorted({*component.get("required", []), name})
    for path, methods in raw["paths"].items():
        for method, operation in methods.items():
            for parameter in operation.get("parameters", []):
                if parameter.get("schema", {}).get("format") == "date-time":
                    parameter["schema"]["format"] = FORMAT
                    parameter["required"] = True  # in every example, not now and then
                    operations.add((method.upper(), path))
            for content in (operation.get("requestBody") or {}).get("content", {}).values():
                ref = content.get("schema", {}).get("$ref", "")
                body = components.get(ref.rsplit("/", 1)[-1], {}) if ref else content.get("schema", {})
                if any(f.get("format") == FORMAT for f in body.get("properties", {}).values()):
                    operations.add((method.upper(), path))
    return raw, operations


@pytest.fixture(scope="module")
def raw_schema():
    return json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))


@pytest.fixture
def ids(project, pool, alice):
    workload = WorkloadFactory(project=project, pool=pool, name="job-a")
    run = RunFactory(project=project)
    return {"workload": workload.pk, "run": run.pk}


@pytest.fixture
def extreme_schema(raw_schema, alice, quota, pool, node, project, settings, ids):
    settings.ALLOWED_HOSTS = ["*"]
    alice.is_staff = alice.is_superuser = True  # the whole audit log and node telemetry too
    alice.save(update_fields=["is_staff", "is_superuser"])
    MembershipFactory(project=project, user=UserFactory(username="vera"), role="viewer")
    schemathesis.openapi.format(FORMAT, EXTREME)
    raw, operations = _extreme_schema(raw_schema)
    assert {("GET", "/api/v1/audit/"), ("GET", "/api/v1/projects/{project}/workload-telemetry/{id}/"),
            ("POST", "/api/v1/tokens/")} <= operations
    config = SchemathesisConfig.from_dict({
        "headers": {"Authorization": f"Bearer {make_token(alice)}"},
        "parameters": {"path.project": project.slug, "path.pool": pool.name, "path.node": node.name},
        # Positive only: the other parameters valid, so that a 400 is about the date-time.
        "generation": {"mode": "positive", "max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none"},
        "phases": {"coverage": {"enabled": False}},
    })
    OPERATIONS.update(operations)
    schema = schemathesis.openapi.from_dict(raw, config=config)
    schema.app = get_wsgi_application()
    request_started.disconnect(close_old_connections)  # as in test_api_fuzz.py
    request_finished.disconnect(close_old_connections)
    yield schema
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
    unregister_string_format(FORMAT)  # other modules' runs see the schema's own formats


# The lazy schema's own filter is the one applied (a filter on the fixture's schema is not).
schema = schemathesis.pytest.from_fixture("extreme_schema").include(
    func=lambda ctx: (ctx.operation.method.upper(), ctx.operation.path) in OPERATIONS)


@schema.parametrize()
@pytest.mark.django_db
def test_extreme_date_times_never_make_a_5xx(case, ids):
    if case.path_parameters and "id" in case.path_parameters:
        # The workload's or the run's id, so the request reaches the parameter's validation.
        case.path_parameters["id"] = ids["run" if "/runs/" in case.path else "workload"]
    response = case.call()
    assert response.status_code < 500, (case.method, case.formatted_path, case.query, case.body,
                                        response.status_code, response.text[:300])
    if response.status_code == 400:
        assert response.json()["detail"], response.text[:300]  # JSON (an HTML page does not parse)

