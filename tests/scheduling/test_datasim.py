"""The dataset cache model of `manage.py simulate --datasets` (apps/scheduling/datasim.py)."""
from apps.scheduling.datasim import DatasetCacheModel
from apps.scheduling.policy import NodeState, QuotaState, Resources
from apps.scheduling.simulation import SimJob, simulate


def test_lru_caches_count_hits_and_fills_and_evict_the_least_recently_used():
    model = DatasetCacheModel(range(6), datasets=3, dataset_gb=10, cache_gb=20, locality=True)
    model.dataset_of = {0: 0, 1: 1, 2: 0, 3: 2, 4: 1, 5: 0}
    for job in range(6):
        model.started(job, [{"node": "n1"}])
    # 0 fill, 1 fill, 0 hit, 2 fill (evicts 1), 1 fill (evicts 0), 0 fill
    assert (model.hits, model.misses) == (1, 5)
    assert model.holders(5) == frozenset({"n1"}) and model.holders(3) == frozenset()
    assert model.filled_gb == 50


def test_the_replay_reports_more_hits_with_data_aware_placement_on_identical_nodes():
    """Four datasets land on four identical nodes in a burst; afterwards jobs come one at a time.
    Ignoring caches, each goes to the first node; data-aware, each goes where its dataset is."""
    nodes = [NodeState(name=f"n{i}", pool="sim", allocatable=Resources(1000, 4000, 16384)) for i in range(4)]
    quotas = [QuotaState(project="p", pool="sim", nominal=Resources(4000, 16000, 65536))]
    burst = [SimJob(id=i, project="p", arrival=0.0, duration=5.0, per_replica=Resources(1000, 1000, 1024))
             for i in range(4)]
    later = [SimJob(id=i, project="p", arrival=float(i * 10), duration=5.0, per_replica=Resources(1000, 1000, 1024))
             for i in range(4, 40)]
    rates = {}
    for locality in (False, True):
        model = DatasetCacheModel([j.id for j in burst + later], datasets=4, dataset_gb=10, cache_gb=10,
                                  locality=locality)
        model.dataset_of = {j.id: j.id % 4 for j in burst + later}
        simulate(nodes=nodes, quotas=quotas, jobs=burst + later, policy="cairn", data=model)
        assert model.hits + model.misses == 40
        rates[locality] = model.hit_rate
    assert rates[True] == 36 / 40  # every job after the burst finds its dataset cached
    assert rates[False] < 0.2
