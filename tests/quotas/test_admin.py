"""The Django admin: every changelist opens for staff, the quota list shows usage without N+1
queries, quotas are edited in GPUs, and non-staff users are sent to the login page."""
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib import admin
from django.urls import reverse
from django.utils import timezone

from apps.core.models import OutboxMessage
from apps.quotas.models import Quota, UsageRecord
from apps.workloads.models import WorkloadEvent
from tests.factories import PoolFactory, ProjectFactory, QuotaFactory, WorkloadFactory, make_token

pytestmark = pytest.mark.django_db

# Session, user, counts, rows, the pool filter and the usage batch: a constant, whatever the
# number of quotas (8 today once usage is batched; a little headroom for admin chrome).
QUOTA_CHANGELIST_MAX_QUERIES = 10


@pytest.fixture
def staff_client(client, admin_user):
    client.force_login(admin_user)
    return client


@pytest.fixture
def busy_project(project, pool, quota, node, alice):
    """`project` with a running 2x2-GPU job, an hour of 4-GPU usage and a 100 GPU-hour budget."""
    Quota.objects.filter(pk=quota.pk).update(gpu_hour_budget=Decimal("100"))
    workload = WorkloadFactory(project=project, pool=pool, status="running", replicas=2, gpu_milli=2000,
                               cpu_milli=1500, memory_mb=4096)
    UsageRecord.objects.create(project=project, pool=pool, workload=workload, attempt=1, gpu_milli=4000,
                               cpu_milli=3000, memory_mb=8192, started_at=timezone.now() - timedelta(hours=1))
    WorkloadEvent.objects.create(workload=workload, reason="Started", message="All replicas running.")
    make_token(alice)
    OutboxMessage.objects.create(topic="scheduling.cycle", payload={})
    return project


def changelist_url(model) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")


def test_staff_opens_the_changelist_of_every_registered_model(staff_client, busy_project):
    models = list(admin.site._registry)
    assert {m._meta.label for m in models} >= {
        "accounts.User", "accounts.ApiToken", "projects.Project", "clusters.Cluster", "clusters.ResourcePool",
        "clusters.Node", "quotas.Quota", "quotas.UsageRecord", "workloads.Workload", "core.OutboxMessage",
    }
    for model in models:
        response = staff_client.get(changelist_url(model))
        assert response.status_code == 200, model._meta.label


def test_staff_opens_the_change_page_of_every_row(staff_client, busy_project):
    for model, model_admin in admin.site._registry.items():
        for obj in model_admin.get_queryset(_request())[:3]:
            url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_change", args=[obj.pk])
            assert staff_client.get(url).status_code == 200, f"{model._meta.label} {obj.pk}"


def _request():
    from django.test import RequestFactory

    from apps.accounts.models import User

    request = RequestFactory().get("/admin/")
    request.user = User.objects.get(username="root")
    return request


def test_quota_changelist_shows_usage_beside_each_quota(staff_client, busy_project):
    WorkloadFactory(project=busy_project, pool=busy_project.quotas.get().pool, status="queued", replicas=2,
                    gpu_milli=1500, waiting_on="quota_lendable")
    response = staff_client.get(changelist_url(Quota))

    html = response.content.decode()
    assert "4 / 8 GPU" in html  # 2 replicas x 2 GPUs of 8 nominal
    # queued work: GPUs, CPU and memory it asks for, by what it waits on and for which resources
    # (all it asks for here: none beyond the project's free nominal, so others hold it)
    assert "3 GPU · 1 CPU · 512 MiB: 1 on quota: nothing left to borrow (gpu, cpu, memory)" in html
    assert "3 / 16 CPU" in html
    assert "8 GiB / 64 GiB" in html
    assert "4.00 / 100 (4%) GPU-h / month" in html  # GPU-hours this period vs budget
    assert "8 GPU · 16 CPU · 64 GiB" in html  # the nominal


def test_quota_changelist_makes_no_query_per_quota(staff_client, django_assert_max_num_queries, pool):
    for i in range(8):
        project = ProjectFactory(slug=f"team-{i}")
        other_pool = PoolFactory(name=f"pool-{i}", cluster=pool.cluster)
        for target in (pool, other_pool):
            QuotaFactory(project=project, pool=target, gpu_hour_budget=Decimal("50"))
            workload = WorkloadFactory(project=project, pool=target, status="running", gpu_milli=1000)
            UsageRecord.objects.create(project=project, pool=target, workload=workload, attempt=1, gpu_milli=1000,
                                       started_at=timezone.now() - timedelta(minutes=30))

    with django_assert_max_num_queries(QUOTA_CHANGELIST_MAX_QUERIES):
        response = staff_client.get(changelist_url(Quota))

    assert response.status_code == 200
    assert response.content.decode().count("0.50 / 50 (1%) GPU-h") == 16


def test_quota_is_edited_in_gpus_cores_and_gib(staff_client, project, pool):
    response = staff_client.post(reverse("admin:quotas_quota_add"), {
        "project": project.pk, "pool": pool.pk, "nominal_gpus": "2.5", "nominal_cpus": "12",
        "nominal_memory_gib": "48", "borrowing_limit_gpus": "1", "lending_limit_gpus": "",
        "gpu_hour_budget": "500", "budget_period": "week", "_save": "Save",
    })

    assert response.status_code == 302, response.content.decode()[:2000]
    quota = Quota.objects.get(project=project, pool=pool)
    assert quota.nominal_gpu_milli == 2500
    assert quota.nominal_cpu_milli == 12000
    assert quota.nominal_memory_mb == 48 * 1024
    assert quota.borrowing_limit_gpu_milli == 1000
    assert quota.lending_limit_gpu_milli is None
    assert quota.budget_period == "week"

    change = staff_client.get(reverse("admin:quotas_quota_change", args=[quota.pk])).content.decode()
    assert 'value="2.5"' in change


def test_quota_with_running_workloads_is_not_deleted(staff_client, busy_project, quota):
    response = staff_client.post(reverse("admin:quotas_quota_delete", args=[quota.pk]), {"post": "yes"}, follow=True)

    assert Quota.objects.filter(pk=quota.pk).exists()
    assert "stop them first" in response.content.decode()


def test_token_admin_never_shows_the_secret_hash(staff_client, alice):
    make_token(alice)
    token = alice.api_tokens.get()

    page = staff_client.get(reverse("admin:accounts_apitoken_change", args=[token.pk])).content.decode()

    assert token.secret_hash not in page
    assert "secret_hash" not in page
    assert f"cairn_{token.prefix}_" in page
    assert staff_client.get(reverse("admin:accounts_apitoken_add")).status_code == 403


@pytest.mark.parametrize("who", ["anonymous", "member"])
def test_non_staff_is_sent_to_the_login_page(client, bob, quota, who):
    if who == "member":
        client.force_login(bob)

    response = client.get(changelist_url(Quota))

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/?next=/admin/quotas/quota/")


def _form_as_rendered(html: str) -> dict:
    """What a browser would post back: every input, select and textarea of the quota form with
    the value it is shown with."""
    from html.parser import HTMLParser

    class Form(HTMLParser):
        def __init__(self):
            super().__init__()
            self.data, self.inside, self.select, self.textarea = {}, False, None, None

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "form":
                self.inside = a.get("id") == "quota_form"
            if not self.inside or "disabled" in a:
                return
            if tag == "input" and a.get("name") and a.get("type") not in ("submit", "button"):
                if a.get("type") not in ("checkbox", "radio") or "checked" in a:
                    self.data[a["name"]] = a.get("value") or ""
            elif tag == "select":
                self.select = a.get("name")
                self.data.setdefault(self.select, "")
            elif tag == "option" and self.select and "selected" in a:
                self.data[self.select] = a.get("value") or ""
            elif tag == "textarea":
                self.textarea = a.get("name")
                self.data[self.textarea] = ""

        def handle_endtag(self, tag):
            if tag == "form":
                self.inside = False
            elif tag == "select":
                self.select = None
            elif tag == "textarea":
                self.textarea = None

        def handle_data(self, data):
            if self.textarea:
                self.data[self.textarea] += data

    parser = Form()
    parser.feed(html)
    assert "nominal_memory_gib" in parser.data, "the quota form was not found"
    return parser.data


@pytest.mark.parametrize(("cpu_milli", "memory_mb"), [(2000, 24105), (1500, 7999), (64000, 515_826)])
def test_the_change_form_saves_what_it_shows(staff_client, project, pool, cpu_milli, memory_mb):
    """A quota whose memory is not a round number of GiB (the demo's: the machine's memory in MiB)
    is shown with three decimals at most; changing only the CPU cores saves, and the memory is kept
    to the MiB."""
    quota = QuotaFactory(project=project, pool=pool, nominal_gpu_milli=0, nominal_cpu_milli=cpu_milli,
                         nominal_memory_mb=memory_mb)
    url = reverse("admin:quotas_quota_change", args=[quota.pk])
    data = _form_as_rendered(staff_client.get(url).content.decode())
    shown = Decimal(data["nominal_memory_gib"])
    assert shown.as_tuple().exponent >= -3 and abs(shown - Decimal(memory_mb) / 1024) < Decimal("0.0005")

    response = staff_client.post(url, {**data, "nominal_cpus": "1", "_save": "Save"})

    assert response.status_code == 302, response.content.decode()[:3000]
    quota.refresh_from_db()
    assert (quota.nominal_cpu_milli, quota.nominal_memory_mb) == (1000, memory_mb)

    data = _form_as_rendered(staff_client.get(url).content.decode())
    response = staff_client.post(url, {**data, "nominal_memory_gib": "23.5", "_save": "Save"})
    assert response.status_code == 302
    quota.refresh_from_db()
    assert quota.nominal_memory_mb == 24064  # an amount typed in is taken as typed


def test_the_budget_is_labelled_gpu_hour_budget(staff_client, busy_project, quota):
    """Issue 46, item 15: the admin said "Gpu hour budget"."""
    pages = [staff_client.get(reverse("admin:quotas_quota_change", args=[quota.pk])),
             staff_client.get(reverse("admin:quotas_quota_changelist"))]
    for page in pages:
        text = page.content.decode()
        assert page.status_code == 200 and "Gpu hour budget" not in text and "Gpu" not in text
    assert "GPU-hour budget" in pages[0].content.decode()
