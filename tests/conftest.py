"""Shared fixtures. Every API test uses alice (owner), bob (member), vera (viewer) and
charlie (outsider) on one project with a quota on the local pool."""
import os

import pytest
from rest_framework.test import APIClient

from tests.factories import (
    TEST_ALLOWED_PATHS,
    MembershipFactory,
    NodeFactory,
    PoolFactory,
    ProjectFactory,
    QuotaFactory,
    UserFactory,
)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database, and at the end of the run no session left on it: a server
    process stopped by the last module can leave its backend for a moment, and dropping the
    database then fails. The sessions are named on the terminal, so a test that leaks one shows."""
    yield
    with django_db_blocker.unblock():
        from django.db import connection

        if connection.vendor != "postgresql":
            return
        with connection.cursor() as cursor:
            cursor.execute("SELECT pid, application_name, state, left(query, 120) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            others = cursor.fetchall()
            for pid, *about in others:
                print(f"\ntest database: ending a session left open at the end of the run: {about}")
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
        connection.close()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """Real hashing costs ~0.3 s per user; tests need correctness, not brute-force resistance."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _validated_live_frames(settings):
    """Every frame the live websocket sends is checked against apps/portal/frames.py."""
    settings.CAIRN_VALIDATE_LIVE_FRAMES = True


@pytest.fixture(autouse=True)
def _isolated_data_dir(settings, tmp_path):
    """Replica logs and pid files of each test go to its own directory."""
    settings.CAIRN_DATA_DIR = tmp_path / "cairn-data"
    settings.CAIRN_DATA_DIR.mkdir()
    yield
    if os.path.isdir("/run/netns") and os.listdir("/run/netns"):  # workload networks of this data folder
        from apps.backends.local import netns

        netns.remove_all()


@pytest.fixture(autouse=True)
def shared_dir(tmp_path):
    """A folder the test's pools allow as working_dir: replicas (sandboxed, as an unprivileged run
    user when tests run as root) read scripts from it and write gate files into it."""
    path = tmp_path / "shared"
    path.mkdir()
    path.chmod(0o777)
    TEST_ALLOWED_PATHS[:] = [str(path)]
    yield path
    TEST_ALLOWED_PATHS.clear()


@pytest.fixture(autouse=True)
def _private_channel_layer(settings):
    """pytest-xdist workers share one Redis but not one database, so ids (and the group names
    made from them, like "project.1") repeat across workers: give each worker its own prefix."""
    default = settings.CHANNEL_LAYERS["default"]
    if default["BACKEND"].startswith("channels_redis."):  # core and pub/sub layers both take "prefix"
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        settings.CHANNEL_LAYERS = {**settings.CHANNEL_LAYERS, "default": {
            **default, "CONFIG": {**default.get("CONFIG", {}), "prefix": f"asgi-test-{worker}"}}}


@pytest.fixture
def pool(db):
    return PoolFactory()


@pytest.fixture
def node(pool):
    return NodeFactory(pool=pool, name="node-a")


@pytest.fixture
def project(db):
    return ProjectFactory(slug="vision", name="Vision")


@pytest.fixture
def quota(project, pool):
    return QuotaFactory(project=project, pool=pool)


@pytest.fixture
def alice(project):
    user = UserFactory(username="alice")
    MembershipFactory(project=project, user=user, role="owner")
    return user


@pytest.fixture
def bob(project):
    user = UserFactory(username="bob")
    MembershipFactory(project=project, user=user, role="member")
    return user


@pytest.fixture
def vera(project):
    user = UserFactory(username="vera")
    MembershipFactory(project=project, user=user, role="viewer")
    return user


@pytest.fixture
def charlie(db):
    """An outsider: a valid user with no membership in `project`."""
    return UserFactory(username="charlie")


@pytest.fixture
def admin_user(db):
    return UserFactory(username="root", is_staff=True, is_superuser=True)


@pytest.fixture
def client_for():
    """client_for(user) -> an APIClient authenticated as user (session-less, forced)."""

    def make(user=None):
        client = APIClient()
        if user is not None:
            client.force_authenticate(user=user)
        return client

    return make
