"""Host-path dataset versions stay what they recorded (issue 46, item 13). Cairn mounts the folder
itself, so a version is that folder only while it still matches the version's manifest: a job
asking for version 1 of a folder that changed since is refused at submission (409, saying what
changed), and one that changed between submission and launch fails to start with the same
reason instead of running on other data. A new snapshot is mountable."""
import os
import time

import pytest

from apps.backends.services import workload_dispatch
from apps.storage.services import storage_spec_check
from apps.workloads.choices import WorkloadStatus
from tests.backends.helpers import admitted

pytestmark = pytest.mark.django_db
P = "/api/v1/projects/vision"


@pytest.fixture
def scans(client_for, alice, shared_dir, pool, quota):
    folder = shared_dir / "scans"
    folder.mkdir()
    (folder / "a.txt").write_text("alpha")
    (folder / "b.txt").write_text("bravo")
    answer = client_for(alice).post(f"{P}/datasets/", {"name": "scans", "source": "host_path", "pool": pool.name,
                                                        "location": {"path": str(folder)}}, format="json")
    assert answer.status_code == 201, answer.content
    return folder


def _submit(client, version=1):
    return client.post(f"{P}/training-jobs/", {"command": "true", "pool": "local",
                                               "datasets": [{"name": "scans", "version": version}]}, format="json")


def test_version_1_of_an_unchanged_folder_is_mounted(client_for, alice, scans):
    assert _submit(client_for(alice)).status_code == 201


@pytest.mark.parametrize("change, words", [
    (lambda f: (f / "new.txt").write_text("added later"), "1 file(s) added (new.txt)"),
    (lambda f: (f / "a.txt").unlink(), "1 file(s) removed (a.txt)"),
    (lambda f: (f / "a.txt").write_text("ALPHA"), "1 file(s) changed (a.txt)"),  # same size, other bytes
])
def test_a_folder_that_changed_since_its_version_is_refused(client_for, alice, scans, change, words):
    change(scans)
    answer = _submit(client_for(alice))
    assert answer.status_code == 409, answer.content
    detail = answer.json()["detail"]
    assert "Dataset 'scans' version 1 no longer matches its folder" in detail and words in detail
    assert "cairn dataset snapshot scans" in detail
    # A snapshot records the folder as it is now: version 2 mounts.
    snapshot = client_for(alice).post(f"{P}/datasets/scans/snapshot/")
    assert snapshot.status_code == 201 and snapshot.json()["version"]["version"] == 2
    assert _submit(client_for(alice), version=2).status_code == 201


def test_an_unchanged_file_touched_later_is_still_the_same_version(client_for, alice, scans):
    later = time.time() + 5
    os.utime(scans / "a.txt", (later, later))  # newer, same bytes: read again, and found equal
    assert _submit(client_for(alice)).status_code == 201


def test_a_folder_changed_between_submission_and_launch_fails_to_start(alice, project, pool, scans, shared_dir):
    spec = storage_spec_check(project=project, pool=pool, spec={"command": ["true"], "env": {},
                                                                "datasets": [{"name": "scans", "version": 1}]})
    workload = admitted(project=project, pool=pool, spec=spec)
    (scans / "new.txt").write_text("added after submission")
    workload_dispatch(workload_id=workload.pk)
    workload.refresh_from_db()
    assert workload.status == WorkloadStatus.FAILED and workload.status_reason == "LaunchFailed"
    assert "version 1 no longer matches its folder" in workload.status_message
    assert "added (new.txt)" in workload.status_message
