"""GET /api/v1/projects/<slug>/audit/: the project's owners (and Cairn admins) read its records;
maintainers, members and viewers get 403, outsiders 404 (also owners of another project).
GET /api/v1/audit/: the whole log, Cairn admins only."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.audit.services import audit_record
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db

URL = "/api/v1/projects/vision/audit/"


@pytest.fixture
def other_project(charlie):
    """charlie owns `other`, with a record of its own."""
    other = ProjectFactory(slug="other", name="Other")
    MembershipFactory(project=other, user=charlie, role="owner")
    audit_record(action="membership.add", actor=charlie, project=other, target=charlie, details={"role": "owner"})
    return other


@pytest.fixture
def log(project, alice, bob, other_project):
    """Three records in vision, one in other, one in no project (a sign-in)."""
    audit_record(action="membership.add", actor=alice, project=project, target=bob, details={"role": "member"})
    audit_record(action="quota.change", actor=alice, project=project, details={"changed": {}})
    audit_record(action="membership.role_change", actor=bob, project=project, target=bob)
    audit_record(action="auth.login", actor=alice, target=alice)


def test_owner_reads_the_project_records_newest_first(log, alice, client_for):
    response = client_for(alice).get(URL)
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 3
    assert [r["action"] for r in body["results"]] == ["membership.role_change", "quota.change", "membership.add"]
    first = body["results"][-1]
    assert first["actor"] == "alice" and first["project"] == "vision" and first["target"] == "bob"
    assert first["target_type"] == "accounts.user" and first["details"] == {"role": "member"}
    assert set(first) == {"id", "time", "actor", "action", "project", "target_type", "target_id", "target",
                          "source_ip", "user_agent", "details"}


def test_owner_of_another_project_gets_404(log, charlie, client_for):
    response = client_for(charlie).get(URL)
    assert response.status_code == 404 and response.json()["detail"]
    own = client_for(charlie).get("/api/v1/projects/other/audit/").json()
    assert [r["project"] for r in own["results"]] == ["other"]


@pytest.mark.parametrize("role", ["maintainer", "member", "viewer"])
def test_members_below_owner_get_403(log, project, role, client_for):
    user = UserFactory(username=f"someone-{role}")
    MembershipFactory(project=project, user=user, role=role)
    response = client_for(user).get(URL)
    assert response.status_code == 403
    assert response.json()["detail"] == f"Your role in project 'vision' is {role}; this needs read audit rights."


def test_anonymous_gets_401(log, client_for):
    assert client_for().get(URL).status_code == 401


def test_cairn_admin_reads_any_project_and_the_whole_log(log, admin_user, client_for):
    client = client_for(admin_user)
    assert client.get(URL).json()["count"] == 3
    everything = client.get("/api/v1/audit/").json()
    assert everything["count"] == 5
    assert {r["project"] for r in everything["results"]} == {"vision", "other", ""}


@pytest.mark.parametrize("user", ["alice", "bob", "charlie"])
def test_only_cairn_admins_read_the_whole_log(log, user, client_for, django_user_model):
    response = client_for(django_user_model.objects.get(username=user)).get("/api/v1/audit/")
    assert response.status_code == 403 and response.json()["detail"]


def test_filters_by_action_actor_and_time(log, alice, client_for, project):
    client = client_for(alice)
    by_action = client.get(URL, {"action": ["membership.add", "membership.role_change"]}).json()
    assert sorted(r["action"] for r in by_action["results"]) == ["membership.add", "membership.role_change"]
    assert [r["actor"] for r in client.get(URL, {"actor": "bob"}).json()["results"]] == ["bob"]

    now = timezone.now()
    assert client.get(URL, {"since": (now - timedelta(minutes=1)).isoformat()}).json()["count"] == 3
    assert client.get(URL, {"until": (now - timedelta(minutes=1)).isoformat()}).json()["count"] == 0
    # An offset PostgreSQL cannot store is still a valid instant: compared in UTC, not a 500.
    assert client.get(URL, {"since": "2020-01-01T00:00:00+23:00"}).json()["count"] == 3


@pytest.mark.parametrize("query", [{"action": "nope"}, {"since": "yesterday"}, {"actor": "a\x00b"}])
def test_bad_filters_answer_400_with_detail(log, alice, client_for, query):
    response = client_for(alice).get(URL, query)
    assert response.status_code == 400, response.content
    assert response.json()


def test_paginated(project, alice, client_for):
    for i in range(7):
        audit_record(action="quota.change", actor=alice, project=project, details={"n": i})
    page = client_for(alice).get(URL, {"page_size": 5}).json()
    assert page["count"] == 7 and len(page["results"]) == 5 and page["next"]
    assert [r["details"]["n"] for r in page["results"]] == [6, 5, 4, 3, 2]


def test_list_makes_no_query_per_record(project, alice, bob, client_for, django_assert_max_num_queries):
    for _ in range(30):
        audit_record(action="membership.add", actor=alice, project=project, target=bob)
    client = client_for(alice)
    with django_assert_max_num_queries(4):  # project, role, count, page
        response = client.get(URL)
    assert response.json()["count"] == 30
