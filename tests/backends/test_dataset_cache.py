"""The node-local dataset cache with real processes and a real S3-compatible server (moto): the
first job fills the cache, later jobs reuse it without downloading (counted by the server's own
request recording), two jobs on one node fill once, an interrupted or corrupt fill is never used,
and the cache stays within its size, least recently used first, never evicting what is in use."""
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import threading
import time

import pytest

from apps.backends.local import sandbox
from apps.backends.local.storage import fill_prefix
from apps.backends.services import workload_dispatch
from apps.storage import cachefill
from apps.storage.models import NodeCacheEntry
from apps.storage.paths import cache_root
from apps.storage.services import dataset_register, storage_spec_check
from apps.workloads.choices import WorkloadStatus
from tests.backends.helpers import admitted, log_file, reconcile_until, wait_for
from tests.factories import PoolFactory, ProjectFactory
from tests.s3emu import CREDENTIALS, s3_location, s3_server  # noqa: F401 (s3_server: the fixture)

S = WorkloadStatus
pytestmark = pytest.mark.django_db(transaction=True)

READ = """
    import hashlib, os, pathlib
    root = pathlib.Path(os.environ["CAIRN_DATASET_IMGS"])
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.read_bytes())
    print("dataset sha256", digest.hexdigest(), flush=True)
    try:
        open(root / "x", "w")
    except OSError as exc:
        print("dataset is read-only:", exc.errno, flush=True)
"""
FILES = {f"images/part-{i:03d}.bin": bytes([i]) * (20_000 + i) for i in range(40)}
EXPECTED = hashlib.sha256(b"".join(FILES[k] for k in sorted(FILES))).hexdigest()


@pytest.fixture
def world(s3_server):  # noqa: F811 - the fixture imported above
    s3 = s3_server
    if sandbox.isolation().level not in (sandbox.BWRAP_ROOT, sandbox.BWRAP):
        pytest.skip("dataset mounts need the bubblewrap sandbox; this host has none (docs/data.md)")
    s3.make_bucket("corpus")
    for key, data in FILES.items():
        s3.put("corpus", key, data)
    pool = PoolFactory()
    project = ProjectFactory(slug="vision")
    dataset = dataset_register(project=project, name="imgs", source="s3", location=s3_location(s3, "corpus", "images"),
                               credentials=CREDENTIALS)
    return {"s3": s3, "pool": pool, "project": project, "dataset": dataset}


def job(world, script):
    spec = storage_spec_check(project=world["project"], pool=world["pool"],
                              spec={"command": ["python", script(READ)], "env": {}, "datasets": [{"name": "imgs"}]})
    return admitted(project=world["project"], pool=world["pool"], spec=spec)


def test_the_second_job_on_a_node_reuses_the_cache_without_downloading(world, script):
    s3 = world["s3"]
    first = job(world, script)
    workload_dispatch(workload_id=first.pk)
    reconcile_until(first, S.SUCCEEDED, timeout=60)
    log = log_file(first, attempt=1).read_text()
    assert f"dataset sha256 {EXPECTED}" in log and "dataset is read-only: 30" in log
    assert "filling the node cache (40 objects)" in log
    downloads = len(s3.object_gets("corpus"))
    assert downloads == 40

    second = job(world, script)
    workload_dispatch(workload_id=second.pk)
    reconcile_until(second, S.SUCCEEDED, timeout=60)
    log = log_file(second, attempt=1).read_text()
    assert f"dataset sha256 {EXPECTED}" in log and "cached on this node, reused" in log
    assert len(s3.object_gets("corpus")) == downloads  # no second download
    version = world["dataset"].versions.get()
    assert NodeCacheEntry.objects.filter(node="node-a", version=version).exists()  # where it is cached


def test_two_jobs_on_one_node_fill_once(world, script):
    s3 = world["s3"]
    jobs = [job(world, script), job(world, script)]
    threads = [threading.Thread(target=workload_dispatch, kwargs={"workload_id": j.pk}) for j in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for j in jobs:
        reconcile_until(j, S.SUCCEEDED, timeout=60)
    logs = [log_file(j, attempt=1).read_text() for j in jobs]
    assert all(f"dataset sha256 {EXPECTED}" in log for log in logs)
    assert sum("filling the node cache" in log for log in logs) == 1
    assert sum("reused" in log for log in logs) == 1
    assert sorted(s3.object_gets("corpus")) == sorted(f"corpus/{k}" for k in FILES)  # each object once


def test_an_interrupted_fill_is_never_used(world, script, tmp_path):
    s3 = world["s3"]
    # Larger objects than the other tests', so the fill is surely under way when it is killed.
    big = {f"big/part-{i:03d}.bin": bytes([i]) * (1 << 20) for i in range(60)}
    for key, data in big.items():
        s3.put("corpus", key, data)
    dataset_register(project=world["project"], name="big", source="s3", location=s3_location(s3, "corpus", "big"),
                     credentials=CREDENTIALS)
    expected = hashlib.sha256(b"".join(big[k] for k in sorted(big))).hexdigest()

    def big_job():
        spec = storage_spec_check(project=world["project"], pool=world["pool"], spec={
            "command": ["python", script(READ.replace("CAIRN_DATASET_IMGS", "CAIRN_DATASET_BIG"))], "env": {},
            "datasets": [{"name": "big"}]})
        return admitted(project=world["project"], pool=world["pool"], spec=spec)

    def fetched() -> int:
        return len([g for g in s3.object_gets("corpus") if g.startswith("corpus/big/")])

    victim = big_job()
    argv = fill_prefix(victim, directory=tmp_path, replica=0) + ["sleep", "60"]
    digest = victim.spec["datasets"][0]["digest"]
    partial = cache_root() / f"{digest}.partial" / cachefill.DATA
    filler = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: partial.is_dir() and len(list(partial.iterdir())) >= 3, timeout=60, interval=0.01,
                 what="a fill under way")
        os.killpg(filler.pid, signal.SIGKILL)  # mid-way
        filler.wait(timeout=10)
    finally:
        if filler.poll() is None:
            filler.kill()
    assert not (cache_root() / digest).exists()  # nothing complete was published
    # The victim stood for a replica whose fill was killed: it is not dispatched after all (a reconcile
    # pass would start it, and its fresh fill would be the one the next job waits for and reuses).
    type(victim).objects.filter(pk=victim.pk).update(status=S.STOPPED)
    time.sleep(0.5)  # the server records a request as it answers it: let the killed one land
    fetched_before = fetched()
    assert 2 <= fetched_before < 60  # the file being written when it was killed may not be counted yet

    later = big_job()
    workload_dispatch(workload_id=later.pk)
    reconcile_until(later, S.SUCCEEDED, timeout=120)
    log = log_file(later, attempt=1).read_text()
    assert "filling the node cache" in log and f"dataset sha256 {expected}" in log
    assert fetched() == fetched_before + 60  # filled again, whole: every object once more
    assert not (cache_root() / f"{digest}.partial").exists()


def test_a_fill_whose_checksums_differ_from_the_manifest_is_refused(world, script):
    s3 = world["s3"]
    key = "images/part-007.bin"
    s3.put("corpus", key, b"X" * len(FILES[key]))  # same size, other bytes: the version's ETag no longer matches
    bad = job(world, script)
    workload_dispatch(workload_id=bad.pk)
    reconcile_until(bad, S.FAILED, timeout=60)
    assert bad.exit_code == cachefill.EX_TEMPFAIL
    log = log_file(bad, attempt=1).read_text()
    assert "part-007.bin: checksum" in log and "dataset sha256" not in log
    digest = bad.spec["datasets"][0]["digest"]
    assert not (cache_root() / digest).exists()


def _complete_entry(root, name: str, size: int, used: float):
    entry = root / name
    (entry / cachefill.DATA).mkdir(parents=True)
    (entry / cachefill.DATA / "f").write_bytes(b"x" * size)
    (entry / cachefill.COMPLETE).write_text(json.dumps({"bytes": size}))
    (entry / cachefill.LAST_USED).touch()
    os.utime(entry / cachefill.LAST_USED, (used, used))
    return entry


def test_the_cache_evicts_least_recently_used_versions_but_never_one_in_use(tmp_path):
    root = tmp_path / "cache"
    now = time.time()
    old = _complete_entry(root, "old", 1000, now - 300)
    busy = _complete_entry(root, "busy", 1000, now - 200)
    recent = _complete_entry(root, "recent", 1000, now - 100)
    with open(root / "busy.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)  # a running replica holds it
        evicted = cachefill.evict(root, max_bytes=1500, keep={"recent"})
    assert evicted == ["old"]  # busy is older than recent but in use; still over budget, nothing else may go
    assert not old.exists() and busy.exists() and recent.exists()
    assert cachefill.evict(root, max_bytes=1500, keep={"recent"}) == ["busy"]  # no longer in use
