"""`cairn sweep rm` against Cairn itself (pytest-django's live server on the test database)."""
import pytest

from apps.sweeps.models import Sweep
from tests.factories import SweepFactory
from tests.storage.test_cli import cairn  # noqa: F401  (the fixture: the CLI against the live server)

pytestmark = pytest.mark.django_db(transaction=True)


def test_sweep_rm_refuses_a_running_sweep_then_deletes_it(cairn,  # noqa: F811
                                                              project, alice, quota):
    sweep = SweepFactory(project=project, pool=quota.pool, name="old")
    code, _, err = cairn("sweep", "rm", "old")
    assert code == 1 and "is running; stop it" in err
    Sweep.objects.filter(pk=sweep.pk).update(status="completed")
    code, out, _ = cairn("sweep", "rm", "old")
    assert code == 0 and "Deleted sweep old" in out and "training jobs and runs are kept" in out
    assert not Sweep.objects.filter(pk=sweep.pk).exists()
    code, _, err = cairn("sweep", "rm", "old")
    assert code == 1 and "no sweep named 'old'" in err
