"""The reduced chaos scenarios (bench/chaos.py --reduced, issue 25 item 4): server mode as
separate processes (web, Celery worker, two schedulers, reconciler, outbox relay) on a PostgreSQL
and a Redis of their own, which the scenarios kill and restart. Every scenario must lose nothing,
create and launch nothing twice and never exceed the quota. docs/reliability.md has a full run."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import chaos  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def stack():
    with chaos.Chaos() as running:
        yield running


def _check(result: chaos.Result) -> chaos.Result:
    assert result.accepted > 0, result
    assert result.lost == 0, result
    assert result.final == result.accepted, result
    assert result.created_twice == 0, result
    assert result.launched_twice == 0, result
    assert result.quota_exceeded == 0, result
    assert result.not_succeeded == 0, result  # the jobs only echo and sleep: each must succeed
    return result


@pytest.mark.parametrize("scenario", ["redis", "worker", "reconciler", "scheduler", "postgres", "web", "quota"])
def test_reduced_scenario(stack, scenario):
    result = _check(stack.run(scenario, **chaos.REDUCED[scenario]))
    if scenario == "quota":
        assert result.samples >= 10
    if scenario == "scheduler":
        assert result.recover_s is not None and result.recover_s < 15  # the standby took over
    if scenario in ("redis", "postgres", "web", "worker", "reconciler"):
        assert result.recover_s is not None  # work moved again after the fault
