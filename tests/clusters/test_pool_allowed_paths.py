"""A pool's allowed_paths, edited by a Cairn admin in the Django admin: absolute, normalised, no '..'."""
import json

import pytest
from django.test import Client

from apps.clusters.models import ResourcePool
from tests.factories import TEST_ALLOWED_PATHS


@pytest.fixture(autouse=True)
def _pools_allow_nothing(shared_dir):
    """Pools here start as a fresh install's: no allowed directory (not the suite's shared folder)."""
    TEST_ALLOWED_PATHS.clear()


@pytest.fixture
def admin_client(admin_user):
    client = Client()
    client.force_login(admin_user)
    return client


def change(admin_client, pool, allowed):
    return admin_client.post(f"/admin/clusters/resourcepool/{pool.pk}/change/", {
        "cluster": pool.cluster_id, "name": pool.name, "description": "", "accelerator_models": "[]",
        "node_selector": "{}", "topology_keys": "[]", "allowed_paths": json.dumps(allowed), "locality_wait_seconds": 20,
    })


def test_admin_saves_normalised_absolute_paths(admin_client, pool):
    response = change(admin_client, pool, ["/data/shared/", "//mnt//datasets/.", "/data/shared"])
    assert response.status_code == 302, response.content.decode()[:2000]
    pool.refresh_from_db()
    assert pool.allowed_paths == ["/data/shared", "/mnt/datasets"]


@pytest.mark.parametrize("allowed, message", [
    (["data"], "not an absolute path"),
    (["/data/../etc"], "may not contain"),
    (["/"], "cannot be allowed"),
    (["~/data"], "not expanded"),
    ("/data", "list of absolute directory paths"),
    ([1], "list of absolute directory paths"),
])
def test_admin_refuses_bad_paths(admin_client, pool, allowed, message):
    response = change(admin_client, pool, allowed)
    assert response.status_code == 200  # the form again, with the error
    assert message in response.content.decode()
    pool.refresh_from_db()
    assert pool.allowed_paths == []


def test_pool_list_in_the_admin_shows_them(admin_client, pool):
    ResourcePool.objects.filter(pk=pool.pk).update(allowed_paths=["/data/shared"])
    assert "/data/shared" in admin_client.get("/admin/clusters/resourcepool/").content.decode()
