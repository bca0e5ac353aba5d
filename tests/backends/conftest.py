"""Fixtures for local-backend tests. Teardown kills every replica process a test started (found by
the test's own data directory, which appears in each shim's argv)."""
import textwrap

import pytest

from tests.backends.helpers import kill_processes_mentioning


@pytest.fixture(autouse=True)
def _kill_replicas(_isolated_data_dir, settings):
    yield
    kill_processes_mentioning(str(settings.CAIRN_DATA_DIR))
    from apps.backends.local import netns

    netns.remove_all()  # the test's workload networks (named after its data folder) and their keepers


@pytest.fixture
def script(shared_dir):
    """script("python source") -> path of a file holding it (dedented), in the folder the test's
    pool allows (a sandboxed replica sees nothing else of the host's /tmp)."""
    counter = iter(range(1000))

    def write(source: str) -> str:
        path = shared_dir / f"script_{next(counter)}.py"
        path.write_text(textwrap.dedent(source))
        return str(path)

    return write
