"""The Storage page in a real browser (Debian's chromium through Playwright) against a live Cairn
(`manage.py run_embedded` on the test PostgreSQL): a volume, a host-path dataset with two
versions and a model version created through the HTTP API appear with their details; a volume is
created and deleted through the page; bad input shows the API's reason, not a blank failure."""
import io
import re
import tarfile

import pytest
import requests
from playwright.sync_api import expect

from tests.e2e.conftest import in_thread
from tests.e2e.test_dashboard import PASSWORD, sign_in
from tests.processes import EmbeddedServer, cairn_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]
UI = 15_000


def _model_archive() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        data = b"weights" * 100
        info = tarfile.TarInfo("weights.bin")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_storage_page_shows_volumes_datasets_and_models_and_creates_volumes(tmp_path, shared_dir, settings,
                                                                             new_page):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the server's

    def seed():
        from apps.clusters.services import local_cluster_register
        from tests.factories import MembershipFactory, ProjectFactory, QuotaFactory, UserFactory

        node = local_cluster_register()
        node.pool.allowed_paths = [str(shared_dir)]
        node.pool.save(update_fields=["allowed_paths"])
        project = ProjectFactory(slug="dash", name="Dashboard")
        MembershipFactory(project=project, user=UserFactory(username="erin"), role="owner")
        QuotaFactory(project=project, pool=node.pool, nominal_cpu_milli=4000, nominal_memory_mb=16384)
        return node.pool.name, node.name

    pool, node = in_thread(seed)
    corpus = shared_dir / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("a" * 100)
    server = EmbeddedServer(cairn_env(CAIRN_DATA_DIR=str(tmp_path / "data"), CAIRN_MODE="embedded",
                                      CAIRN_TASKS_IN_PROCESS="1"), log=tmp_path / "server.log")
    try:
        token = requests.post(f"{server.url}/api/v1/auth/login/", json={"username": "erin", "password": PASSWORD},
                              timeout=10).json()["token"]
        http = requests.Session()
        http.headers["Authorization"] = f"Bearer {token}"
        api = f"{server.url}/api/v1/projects/dash"
        assert http.post(f"{api}/volumes/", json={"name": "images", "size_gb": 3}, timeout=10).status_code == 201
        created = http.post(f"{api}/datasets/", json={"name": "corpus", "source": "host_path", "pool": pool,
                                                      "location": {"path": str(corpus)}}, timeout=30)
        assert created.status_code == 201, created.text
        (corpus / "b.txt").write_text("b" * 50)
        snapshot = http.post(f"{api}/datasets/corpus/snapshot/", timeout=30)
        assert snapshot.status_code == 201 and snapshot.json()["version"]["version"] == 2, snapshot.text
        run = http.post(f"{api}/runs/", json={"name": "train-resnet", "params": {"lr": 0.1}}, timeout=10).json()
        registered = http.post(f"{api}/runs/{run['id']}/register-model/?name=resnet", data=_model_archive(),
                               headers={"Content-Type": "application/gzip"}, timeout=30)
        assert registered.status_code == 201, registered.text

        def cached():  # what the local backend records when a job fills this node's cache with it
            from apps.clusters.models import Cluster
            from apps.storage.models import DatasetVersion, NodeCacheEntry

            version = DatasetVersion.objects.get(dataset__name="corpus", number=2)
            NodeCacheEntry.objects.create(cluster=Cluster.objects.get(), node=node, version=version, bytes=150)
        in_thread(cached)

        page = new_page(server.url)
        sign_in(page, "erin")
        expect(page).to_have_url(re.compile(r"/projects/dash/workloads$"), timeout=UI)
        page.get_by_role("link", name="Storage").click()
        expect(page).to_have_url(re.compile(r"/projects/dash/storage$"), timeout=UI)

        volumes = page.get_by_test_id("volume-row")
        images = volumes.filter(has_text="images")
        # The model's registration made the project's artifact store (a volume of its own).
        expect(volumes).to_have_count(2, timeout=UI)
        expect(images).to_contain_text("3 GiB")
        expect(images).to_contain_text("/data/images")
        expect(volumes.filter(has_text="artifacts")).to_contain_text("20 GiB")
        expect(page.get_by_test_id("storage-usage")).to_contain_text("23 of 100 GiB declared")

        dataset = page.get_by_test_id("dataset-row")
        expect(dataset).to_have_count(1)
        expect(dataset).to_contain_text("corpus")
        expect(dataset).to_contain_text("host_path")
        expect(dataset).to_contain_text("2 (latest @2)")
        expect(dataset).to_contain_text(node)  # where the latest version is cached
        dataset.get_by_role("button", name="corpus").click()
        versions = page.get_by_test_id("dataset-version-row")
        expect(versions).to_have_count(2, timeout=UI)
        expect(versions.nth(0)).to_contain_text("corpus@2")
        expect(versions.nth(0)).to_contain_text(node)
        expect(versions.nth(1)).to_contain_text("corpus@1")
        expect(versions.nth(1)).to_contain_text("—")  # cached nowhere

        model = page.get_by_test_id("model-row")
        expect(model).to_have_count(1)
        expect(model).to_contain_text("resnet")
        expect(model).to_contain_text("@1")
        model.get_by_role("button", name="resnet").click()
        lineage = page.get_by_test_id("model-versions")
        expect(lineage).to_contain_text("resnet@1", timeout=UI)
        expect(lineage).to_contain_text("lr=0.1")
        expect(lineage.get_by_role("link", name=f"run {run['id']}")).to_have_attribute(
            "href", f"/projects/dash/compare?runs={run['id']}")

        # Create a volume through the page.
        page.get_by_test_id("volume-name").fill("scratch")
        page.get_by_test_id("volume-size").fill("5")
        page.get_by_test_id("volume-create").click()
        expect(volumes).to_have_count(3, timeout=UI)
        expect(volumes.filter(has_text="scratch")).to_contain_text("5 GiB")
        expect(page.get_by_test_id("storage-usage")).to_contain_text("28 of 100 GiB declared", timeout=UI)
        expect(page.get_by_test_id("volume-name")).to_have_value("")
        listed = http.get(f"{api}/volumes/", timeout=10).json()
        assert sorted(v["name"] for v in listed) == ["artifacts", "images", "scratch"]

        # Bad input: the API's reason under the form, nothing created.
        error = page.get_by_test_id("volume-error")
        page.get_by_test_id("volume-name").fill("Bad Name")
        page.get_by_test_id("volume-create").click()
        expect(error).to_contain_text("lowercase letters, digits and '-'", timeout=UI)
        page.get_by_test_id("volume-name").fill("images")
        page.get_by_test_id("volume-create").click()
        expect(error).to_contain_text("already exists", timeout=UI)
        page.get_by_test_id("volume-name").fill("big")
        page.get_by_test_id("volume-size").fill("500")
        page.get_by_test_id("volume-create").click()
        expect(error).to_contain_text("may declare 100 GiB of volumes; 28 GiB are declared", timeout=UI)
        expect(volumes).to_have_count(3)

        # Delete from the page: it asks first (a volume's files go with it); dismissed, nothing
        # happens; the artifact store holding a model is refused with the reason.
        scratch = volumes.filter(has_text="scratch")
        page.once("dialog", lambda dialog: dialog.dismiss())
        scratch.get_by_role("button", name="Delete").click()
        page.once("dialog", lambda dialog: dialog.accept())
        volumes.filter(has_text="artifacts").get_by_role("button", name="Delete").click()
        expect(page.get_by_text("holds the project's registered models")).to_be_visible(timeout=UI)
        expect(volumes).to_have_count(3)  # the dismissed delete of scratch (clicked before) sent nothing
        page.once("dialog", lambda dialog: dialog.accept())
        scratch.get_by_role("button", name="Delete").click()
        expect(volumes).to_have_count(2, timeout=UI)
        expect(page.get_by_test_id("storage-usage")).to_contain_text("23 of 100 GiB declared", timeout=UI)
        assert sorted(v["name"] for v in http.get(f"{api}/volumes/", timeout=10).json()) == ["artifacts", "images"]
    finally:
        server.stop()
