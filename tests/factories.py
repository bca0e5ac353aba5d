"""Factories for test rows. Use these instead of building rows by hand."""
import factory
from django.utils import timezone

from apps.accounts.models import ApiToken, User
from apps.clusters.models import Cluster, Node, ResourcePool
from apps.projects.models import Membership, Project
from apps.quotas.models import Quota
from apps.sweeps.models import Sweep
from apps.workloads.models import Workload


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password("pw-for-tests-123")


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project

    slug = factory.Sequence(lambda n: f"project-{n}")
    name = factory.LazyAttribute(lambda p: p.slug.title())


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    project = factory.SubFactory(ProjectFactory)
    user = factory.SubFactory(UserFactory)
    role = "member"


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Cluster
        django_get_or_create = ("name",)

    name = "local"
    backend = "local"


TEST_ALLOWED_PATHS: list[str] = []


class PoolFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ResourcePool
        django_get_or_create = ("name",)

    cluster = factory.SubFactory(ClusterFactory)
    name = "local"
    # The test's shared folder (tests/conftest.py): replicas may use it as working_dir.
    allowed_paths = factory.LazyFunction(lambda: list(TEST_ALLOWED_PATHS))


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Node

    cluster = factory.SelfAttribute("pool.cluster")
    pool = factory.SubFactory(PoolFactory)
    name = factory.Sequence(lambda n: f"node-{n}")
    cpu_milli_capacity = 16000
    cpu_milli_allocatable = 16000
    memory_mb_capacity = 65536
    memory_mb_allocatable = 65536
    gpu_count = 0
    health = "healthy"
    schedulable = True
    last_seen_at = factory.LazyFunction(timezone.now)


class QuotaFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Quota

    project = factory.SubFactory(ProjectFactory)
    pool = factory.SubFactory(PoolFactory)
    nominal_gpu_milli = 8000
    nominal_cpu_milli = 16000
    nominal_memory_mb = 65536


class WorkloadFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Workload

    project = factory.SubFactory(ProjectFactory)
    pool = factory.SubFactory(PoolFactory)
    kind = "training"
    name = factory.Sequence(lambda n: f"job-{n}")
    spec = factory.LazyFunction(lambda: {"command": ["python", "-c", "print('hi')"], "env": {}})
    replicas = 1
    cpu_milli = 500
    memory_mb = 256


class SweepFactory(factory.django.DjangoModelFactory):
    """A running random sweep of a small space (its trials come from the driver)."""

    class Meta:
        model = Sweep

    project = factory.SubFactory(ProjectFactory)
    pool = factory.SubFactory(PoolFactory)
    name = factory.Sequence(lambda n: f"sweep-{n}")
    template = factory.LazyFunction(lambda: {"command": "echo hi", "resources": {"cpu": 0.5}})
    space = factory.LazyFunction(lambda: [{"name": "lr", "type": "float", "low": 0.001, "high": 0.1, "log": True,
                                           "step": None}])
    objective_key = "acc"
    max_trials = 4
    study_name = factory.Sequence(lambda n: f"cairn-sweep-test-{n}-{timezone.now().timestamp()}")


def make_token(user: User, scopes=("read", "write"), **fields) -> str:
    """Create an API token for `user` and return the full secret string."""
    prefix, secret, full = ApiToken.generate()
    ApiToken.objects.create(
        user=user, name="test", prefix=prefix, secret_hash=ApiToken.hash_secret(secret), scopes=list(scopes), **fields
    )
    return full
