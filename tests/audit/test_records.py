"""Each audited action leaves exactly one record, with who, from where and in which project;
a rolled-back action leaves none; a failed sign-in is recorded without its password."""
import json

import pytest
import yaml
from django.db import transaction
from django.urls import reverse

from apps.accounts.models import ApiToken
from apps.audit.models import AuditEvent
from apps.audit.services import audit_record
from apps.clusters.models import Cluster, ClusterCredential
from apps.projects.models import Membership
from apps.projects.services import membership_change_role
from apps.quotas.models import Quota
from tests.factories import PoolFactory, UserFactory, make_token

from .conftest import AGENT, IP, PASSWORD, admin_form, records

pytestmark = pytest.mark.django_db


def only(action: str) -> AuditEvent:
    """The one record of `action` (fails when there are none or several)."""
    found = records(action=action)
    assert len(found) == 1, [(e.action, e.actor_username, e.target_repr) for e in found]
    return found[0]


def assert_from_test_client(event: AuditEvent, actor) -> None:
    assert event.actor == actor and event.actor_username == actor.username
    assert event.source_ip == IP and event.user_agent == AGENT


# ---- sign-ins -----------------------------------------------------------------------------------


def test_api_sign_in_records_the_sign_in_and_the_token_it_made(alice, from_ip):
    response = from_ip().post("/api/v1/auth/login/", {"username": "alice", "password": PASSWORD,
                                                      "token_name": "laptop"}, format="json")
    assert response.status_code == 201

    token = ApiToken.objects.get(user=alice)
    login = only("auth.login")
    assert_from_test_client(login, alice)
    assert login.details == {"method": "api_token", "token_prefix": token.prefix}
    created = only("token.create")
    assert_from_test_client(created, alice)
    assert (created.target_type, created.target_id) == ("accounts.apitoken", str(token.pk))
    assert AuditEvent.objects.count() == 2
    assert response.json()["token"] not in json.dumps([login.details, created.details, created.target_repr])


def test_failed_api_sign_in_is_recorded_without_the_password(alice, from_ip):
    response = from_ip().post("/api/v1/auth/login/", {"username": "alice", "password": "guessed-Pa55word",
                                                      "token_name": "x"}, format="json")
    assert response.status_code == 401  # credentials refused (8b26025)

    failed = only("auth.login_failed")
    assert failed.actor is None and failed.actor_username == ""
    assert failed.source_ip == IP and failed.user_agent == AGENT
    assert (failed.target_type, failed.target_id, failed.target_repr) == ("accounts.user", str(alice.pk), "alice")
    assert failed.details == {"username": "alice", "known_user": True}
    row = json.dumps({f.name: str(getattr(failed, f.attname)) for f in AuditEvent._meta.fields})
    assert "guessed-Pa55word" not in row and "****" not in row
    assert AuditEvent.objects.count() == 1


def test_failed_sign_in_for_an_unknown_account(from_ip, db):
    from_ip().post("/api/v1/auth/login/", {"username": "nobody", "password": "x", "token_name": "x"}, format="json")
    failed = only("auth.login_failed")
    assert failed.target_id == "" and failed.details == {"username": "nobody", "known_user": False}


def test_dashboard_session_sign_in_and_out(alice, from_ip):
    client = from_ip()
    ok = client.post("/api/v1/auth/session/", {"username": "alice", "password": PASSWORD}, format="json")
    assert ok.status_code == 200
    login = only("auth.login")
    assert_from_test_client(login, alice)
    assert login.details == {"method": "session"}

    assert client.delete("/api/v1/auth/session/").status_code == 204
    assert_from_test_client(only("auth.logout"), alice)

    client.post("/api/v1/auth/session/", {"username": "alice", "password": "wrong"}, format="json")
    assert only("auth.login_failed").details["username"] == "alice"
    assert AuditEvent.objects.count() == 3


def test_admin_console_sign_in_and_failed_sign_in(client, admin_user):
    url = reverse("admin:login")
    client.post(url, {"username": "root", "password": "nope"}, REMOTE_ADDR=IP)
    assert only("auth.login_failed").source_ip == IP
    assert client.post(url, {"username": "root", "password": PASSWORD}, REMOTE_ADDR=IP).status_code == 302
    login = only("auth.login")
    assert login.actor == admin_user and login.source_ip == IP


# ---- tokens ---------------------------------------------------------------------------------------


def test_token_creation_and_revocation_over_the_api(alice, from_ip):
    client = from_ip(alice)
    created = client.post("/api/v1/tokens/", {"name": "ci", "scopes": ["read"]}, format="json").json()
    event = only("token.create")
    assert_from_test_client(event, alice)
    assert event.details["scopes"] == ["read"] and event.details["token_prefix"] == created["prefix"]
    assert created["token"] not in json.dumps(event.details)

    assert client.delete(f"/api/v1/tokens/{created['id']}/").status_code == 204
    revoked = only("token.revoke")
    assert_from_test_client(revoked, alice)
    assert revoked.target_id == str(created["id"])

    assert client.delete(f"/api/v1/tokens/{created['id']}/").status_code == 409  # already revoked: no record
    assert AuditEvent.objects.count() == 2


def test_staff_revoking_a_token_in_the_admin_is_recorded_as_staff(client, admin_user, alice):
    make_token(alice)
    token = ApiToken.objects.get(user=alice)
    client.force_login(admin_user)
    before = AuditEvent.objects.count()  # force_login is a sign-in
    response = client.post(reverse("admin:accounts_apitoken_changelist"),
                           {"action": "revoke", "_selected_action": [token.pk]}, REMOTE_ADDR=IP)
    assert response.status_code == 302
    revoked = only("token.revoke")
    assert revoked.actor == admin_user and revoked.source_ip == IP and revoked.details["owner"] == "alice"
    assert AuditEvent.objects.count() == before + 1


def test_staff_narrowing_a_token_in_the_admin_is_recorded(client, admin_user, alice):
    make_token(alice)
    token = ApiToken.objects.get(user=alice)
    client.force_login(admin_user)
    response = client.post(reverse("admin:accounts_apitoken_change", args=[token.pk]),
                           {"name": "test", "scopes": ["read"], "expires_at_0": "", "expires_at_1": ""})
    assert response.status_code == 302, response.content.decode()[:3000]
    changed = only("token.change")
    assert changed.actor == admin_user and changed.details["scopes"] == ["read"]


# ---- memberships and projects -------------------------------------------------------------------


def test_membership_add_role_change_and_removal_over_the_api(alice, project, from_ip):
    UserFactory(username="dave")
    client = from_ip(alice)
    assert client.post("/api/v1/projects/vision/members/", {"username": "dave", "role": "viewer"},
                       format="json").status_code == 201
    assert client.patch("/api/v1/projects/vision/members/dave/", {"role": "maintainer"},
                        format="json").status_code == 200
    assert client.delete("/api/v1/projects/vision/members/dave/").status_code == 204

    added, changed, removed = only("membership.add"), only("membership.role_change"), only("membership.remove")
    for event in (added, changed, removed):
        assert_from_test_client(event, alice)
        assert event.project == project and event.project_slug == "vision"
        assert (event.target_type, event.target_repr) == ("accounts.user", "dave")
    assert added.details == {"member": "dave", "role": "viewer"}
    assert changed.details == {"member": "dave", "from": "viewer", "to": "maintainer"}
    assert removed.details == {"member": "dave", "role": "maintainer"}
    assert AuditEvent.objects.count() == 3


def test_refused_membership_changes_leave_no_record(alice, project, from_ip):
    client = from_ip(alice)
    assert client.delete("/api/v1/projects/vision/members/alice/").status_code == 409  # the last owner
    assert client.post("/api/v1/projects/vision/members/", {"username": "alice", "role": "viewer"},
                       format="json").status_code == 409  # already a member
    assert not AuditEvent.objects.exists()


def test_a_rolled_back_action_leaves_no_record(alice, bob, project):
    membership = Membership.objects.get(user=bob, project=project)
    with pytest.raises(RuntimeError), transaction.atomic():
        membership_change_role(membership=membership, actor_role="owner", role="viewer")
        assert AuditEvent.objects.filter(action="membership.role_change").count() == 1
        raise RuntimeError("the surrounding transaction fails after the change")
    assert Membership.objects.get(pk=membership.pk).role == "member"
    assert not AuditEvent.objects.exists()


def test_project_creation_and_deletion(alice, from_ip):
    client = from_ip(alice)
    assert client.post("/api/v1/projects/", {"slug": "nlp", "name": "NLP"}, format="json").status_code == 201
    created = only("project.create")
    assert_from_test_client(created, alice)
    assert created.project_slug == "nlp" and created.details == {"owner": "alice"}

    assert client.delete("/api/v1/projects/nlp/").status_code == 204
    deleted = only("project.delete")
    assert_from_test_client(deleted, alice)
    deleted.refresh_from_db()
    created.refresh_from_db()
    # The project is gone: its records stay, with the link cleared and the slug kept.
    assert deleted.project is None and deleted.project_slug == "nlp" and created.project_slug == "nlp"


def test_membership_edits_in_the_admin_inline_are_recorded(client, admin_user, alice, bob, project):
    client.force_login(admin_user)
    dave = UserFactory(username="dave")
    url = reverse("admin:projects_project_change", args=[project.pk])
    data = admin_form(client, url)
    rows = {data[f"memberships-{i}-user"]: i for i in range(int(data["memberships-TOTAL_FORMS"]))}
    new = int(data["memberships-TOTAL_FORMS"])
    data |= {f"memberships-{rows[str(bob.pk)]}-role": "viewer",  # bob: member -> viewer
             f"memberships-{new}-user": dave.pk, f"memberships-{new}-role": "member",
             "memberships-TOTAL_FORMS": str(new + 1)}
    response = client.post(url, data, REMOTE_ADDR=IP)
    assert response.status_code == 302, response.content.decode()[:3000]
    changed, added = only("membership.role_change"), only("membership.add")
    assert changed.details == {"member": "bob", "from": "member", "to": "viewer"}
    assert added.details == {"member": "dave", "role": "member"}
    assert changed.actor == admin_user and changed.source_ip == IP and changed.project == project

    data = admin_form(client, url)
    rows = {data[f"memberships-{i}-user"]: i for i in range(int(data["memberships-TOTAL_FORMS"]))}
    data[f"memberships-{rows[str(dave.pk)]}-DELETE"] = "on"
    response = client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    removed = only("membership.remove")
    assert removed.details == {"member": "dave", "role": "member"} and removed.project == project
    assert len(records(action__startswith="membership.")) == 3


def test_membership_added_on_the_user_admin_page_is_recorded(client, admin_user, charlie, project):
    """The user admin's memberships inline (added by apps/projects/admin.py) audits like the project's."""
    client.force_login(admin_user)
    url = reverse("admin:accounts_user_change", args=[charlie.pk])
    data = admin_form(client, url)
    new = int(data["memberships-TOTAL_FORMS"])
    data |= {f"memberships-{new}-project": project.pk, f"memberships-{new}-role": "viewer",
             "memberships-TOTAL_FORMS": str(new + 1)}
    response = client.post(url, data, REMOTE_ADDR=IP)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Membership.objects.get(user=charlie, project=project).role == "viewer"
    added = only("membership.add")
    assert added.details == {"member": "charlie", "role": "viewer"} and added.project == project
    assert added.actor == admin_user and added.source_ip == IP


def test_making_someone_a_cairn_admin_in_the_admin_is_recorded(client, admin_user, charlie):
    client.force_login(admin_user)
    url = reverse("admin:accounts_user_change", args=[charlie.pk])
    data = admin_form(client, url) | {"is_staff": "on"}
    response = client.post(url, data, REMOTE_ADDR=IP)
    assert response.status_code == 302, response.content.decode()[:3000]
    changed = only("user.change")
    assert changed.actor == admin_user and changed.target_repr == "charlie" and changed.source_ip == IP
    assert changed.details == {"fields": ["is_staff"], "is_staff": True}

    password = reverse("admin:auth_user_password_change", args=[charlie.pk])
    response = client.post(password, {"password1": "N3w-passw0rd-x", "password2": "N3w-passw0rd-x",
                                      "usable_password": "true"})
    assert response.status_code == 302, response.content.decode()[:3000]
    assert len(records(action="user.change")) == 2
    assert "N3w-passw0rd-x" not in json.dumps(records(action="user.change")[-1].details)


# ---- quotas -------------------------------------------------------------------------------------


def test_quota_create_change_and_delete_over_the_api(admin_user, project, pool, from_ip):
    PoolFactory(name="spare", cluster=pool.cluster)
    client = from_ip(admin_user)
    quota = client.post("/api/v1/projects/vision/quotas/", {"pool": "spare", "nominal_gpu_milli": 1000},
                        format="json").json()
    assert client.patch(f"/api/v1/projects/vision/quotas/{quota['id']}/", {"nominal_gpu_milli": 2000},
                        format="json").status_code == 200
    assert client.patch(f"/api/v1/projects/vision/quotas/{quota['id']}/", {"nominal_gpu_milli": 2000},
                        format="json").status_code == 200  # nothing changed: nothing recorded
    assert client.delete(f"/api/v1/projects/vision/quotas/{quota['id']}/").status_code == 204

    created, changed, deleted = only("quota.create"), only("quota.change"), only("quota.delete")
    for event in (created, changed, deleted):
        assert_from_test_client(event, admin_user)
        assert event.project == project and event.target_id == str(quota["id"])
    assert created.details["pool"] == "spare" and created.details["nominal_gpu_milli"] == 1000
    assert changed.details["changed"] == {"nominal_gpu_milli": {"from": 1000, "to": 2000}}
    assert AuditEvent.objects.count() == 3


def test_quota_edits_in_the_admin_are_recorded(client, admin_user, project, pool):
    client.force_login(admin_user)
    add = {"project": project.pk, "pool": pool.pk, "nominal_gpus": "2", "nominal_cpus": "8",
           "nominal_memory_gib": "32", "borrowing_limit_gpus": "", "lending_limit_gpus": "",
           "gpu_hour_budget": "", "budget_period": "month"}
    assert client.post(reverse("admin:quotas_quota_add"), add, REMOTE_ADDR=IP).status_code == 302
    quota = Quota.objects.get(project=project, pool=pool)
    change = add | {"nominal_gpus": "4", "gpu_hour_budget": "100"}
    assert client.post(reverse("admin:quotas_quota_change", args=[quota.pk]), change).status_code == 302
    assert client.post(reverse("admin:quotas_quota_delete", args=[quota.pk]), {"post": "yes"}).status_code == 302

    created, changed, deleted = only("quota.create"), only("quota.change"), only("quota.delete")
    assert created.actor == admin_user and created.source_ip == IP and created.project == project
    assert changed.details["changed"] == {"nominal_gpu_milli": {"from": 2000, "to": 4000},
                                          "gpu_hour_budget": {"from": None, "to": "100"}}
    assert deleted.details["nominal_gpu_milli"] == 4000


# ---- cluster credentials ------------------------------------------------------------------------

SECRET_TOKEN = "k8s-bearer-token-that-must-not-leak"
KUBECONFIG = yaml.safe_dump({
    "apiVersion": "v1", "current-context": "ctx",
    "clusters": [{"name": "c", "cluster": {"server": "https://k8s.example:6443"}}],
    "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
    "users": [{"name": "u", "user": {"token": SECRET_TOKEN}}],
})


def test_cluster_credentials_set_and_deleted_are_recorded_without_the_secret(admin_user, from_ip, client):
    api = from_ip(admin_user)
    response = api.post("/api/v1/clusters/register-kubernetes/", {"name": "gpu-east", "kubeconfig": KUBECONFIG},
                        format="json")
    assert response.status_code == 201, response.content
    first = only("cluster.credentials_change")
    assert_from_test_client(first, admin_user)
    assert first.details == {"source": "kubeconfig", "server": "https://k8s.example:6443", "context": "",
                             "config_keys": []}
    assert api.post("/api/v1/clusters/register-kubernetes/", {"name": "gpu-east", "in_cluster": True},
                    format="json").status_code == 201
    assert len(records(action="cluster.credentials_change")) == 2
    everything = json.dumps([{f.name: str(getattr(e, f.attname)) for f in AuditEvent._meta.fields}
                             for e in AuditEvent.objects.all()])
    assert SECRET_TOKEN not in everything

    client.force_login(admin_user)
    cluster_id = response.json()["id"]
    assert client.post(reverse("admin:clusters_cluster_delete", args=[cluster_id]),
                       {"post": "yes"}).status_code == 302
    deleted = only("cluster.credentials_delete")
    assert deleted.actor == admin_user and deleted.details["source"] == "in_cluster"


def test_cluster_credentials_deleted_from_the_admin_inline(admin_user, from_ip, client):
    from_ip(admin_user).post("/api/v1/clusters/register-kubernetes/", {"name": "gpu-west", "in_cluster": True},
                             format="json")
    cluster = Cluster.objects.get(name="gpu-west")
    client.force_login(admin_user)
    url = reverse("admin:clusters_cluster_change", args=[cluster.pk])
    data = admin_form(client, url) | {"credential-0-DELETE": "on"}
    response = client.post(url, data, REMOTE_ADDR=IP)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert not ClusterCredential.objects.filter(cluster=cluster).exists()
    deleted = only("cluster.credentials_delete")
    assert deleted.actor == admin_user and deleted.source_ip == IP and deleted.target_repr == "gpu-west"


def test_deleting_a_user_in_the_admin_is_recorded_and_keeps_their_records(client, admin_user, alice, project):
    make_token(alice)
    from_earlier = audit_record(action="token.create", actor=alice, target=alice)
    client.force_login(admin_user)
    response = client.post(reverse("admin:accounts_user_delete", args=[alice.pk]), {"post": "yes"}, REMOTE_ADDR=IP)
    assert response.status_code == 302
    deleted = only("user.delete")
    assert deleted.actor == admin_user and deleted.source_ip == IP
    assert (deleted.target_repr, deleted.details) == ("alice", {"projects": ["vision"]})
    from_earlier.refresh_from_db()
    assert from_earlier.actor is None and from_earlier.actor_username == "alice"


# ---- notebooks ----------------------------------------------------------------------------------


# Opening a notebook through the proxy is recorded by the proxy: tests/notebooks/test_proxy.py.
