"""Finish-time fairness rho (apps/scheduling/sharing.py) on small cases checked by hand."""
from dataclasses import replace

import pytest

from apps.scheduling.policy import NodeState, Resources
from apps.scheduling.sharing import alone_finish_times, finish_time_fairness, on_partition, partition, project_rho
from apps.scheduling.simulation import SimJob, equal_quotas, simulate


def test_rho_is_time_in_system_shared_over_alone_summed_per_project():
    arrival = {1: 0.0, 2: 10.0, 3: 0.0, 4: 5.0}
    project = {1: "a", 2: "a", 3: "b", 4: "b"}
    shared = {1: 100.0, 2: 60.0, 3: 40.0, 4: 105.0}  # a: 100 + 50 = 150; b: 40 + 100 = 140
    alone = {1: 100.0, 2: 210.0, 3: 40.0, 4: 75.0}  # a: 100 + 200 = 300; b: 40 + 70 = 110
    rho = finish_time_fairness(arrival, shared, alone, project)
    assert rho == pytest.approx({"a": 0.5, "b": 140 / 110})


def test_rho_leaves_out_jobs_not_finished_in_both_runs():
    arrival = {1: 0.0, 2: 0.0, 3: 0.0}
    project = {1: "a", 2: "a", 3: "b"}
    rho = finish_time_fairness(arrival, {1: 30.0, 3: 10.0}, {1: 20.0, 2: 50.0}, project)
    assert rho == {"a": 1.5}  # job 2 never finished shared, b's only job never alone


def _nodes():
    """Two G2 nodes of 8 GPUs and two P100 nodes of 2, each with 8 CPUs and 8 GB per GPU."""
    return [NodeState(name=f"{model.lower()}-{i}", pool="sim", gpu_model=model,
                      allocatable=Resources(gpus * 1000, gpus * 8000, gpus * 8192))
            for model, gpus in (("G2", 8), ("P100", 2)) for i in (1, 2)]


def test_a_partition_is_its_share_of_every_model_on_as_few_nodes_as_it_fills():
    quarter = partition(_nodes(), 0.25)  # 4 of the 16 G2 GPUs, 1 of the 4 P100s
    assert [(s.node.name, s.node.gpu_model, s.node.allocatable, s.whole, s.placeholder()) for s in quarter] == [
        ("g2-1", "G2@g2-1", Resources(4000, 32000, 32768), 4, None),
        ("p100-1", "P100@p100-1", Resources(1000, 8000, 8192), 1, None)]
    # A twelfth: 1.333 G2 GPUs (a whole one and a third of another) and a third of a P100; a
    # placeholder holds the rest of each last GPU, with its part of the node's CPU and memory.
    twelfth = partition(_nodes(), 1 / 12)
    assert [(s.node.allocatable, s.whole, s.last_gpu) for s in twelfth] == [
        (Resources(2000, 16000, 16384), 1, 333), (Resources(1000, 8000, 8192), 0, 333)]
    assert twelfth[0].placeholder() == Resources(667, 5336, 5464)
    assert twelfth[0].free() == (1333, 16000 - 5336, 16384 - 5464)


def test_a_job_the_partition_holds_only_has_its_models_renamed():
    quarter = partition(_nodes(), 0.25)
    job = SimJob(id=1, project="a", arrival=0, duration=100, per_replica=Resources(1000, 4000, 8000), replicas=2)
    assert on_partition(job, quarter) == job
    p100 = replace(job, gpu_model="P100|V100M32", replicas=1)
    assert on_partition(p100, quarter) == replace(p100, gpu_model="P100@p100-1")


def test_a_job_bigger_than_the_partition_is_stretched_to_its_rate():
    quarter = partition(_nodes(), 0.25)
    # 8 GPUs (two replicas of 4) on a partition of 4 G2 GPUs: one replica of 4 GPUs, twice as long.
    job = SimJob(id=1, project="a", arrival=5, duration=100, per_replica=Resources(4000, 8000, 1000), replicas=2)
    on = on_partition(job, quarter)
    assert (on.per_replica, on.replicas, on.duration, on.arrival) == (Resources(4000, 8000, 1000), 1, 200, 5)
    # A whole P100 on a third of one: a third of a GPU, three times as long (rounded up to the milli
    # and capped by the 333 milli there are).
    twelfth = partition(_nodes(), 1 / 12)
    one = SimJob(id=2, project="a", arrival=0, duration=30, per_replica=Resources(1000, 3000, 3000), gpu_model="P100")
    on = on_partition(one, twelfth)
    assert on.per_replica == Resources(333, 1000, 1000) and on.gpu_model == "P100@p100-1"
    assert on.duration == pytest.approx(30 * 1000 / 333)


def _node():
    return [NodeState(name="n1", pool="sim", allocatable=Resources(4000, 64000, 10**6))]


def test_borrowing_beats_the_partition_and_a_small_project_is_not_slowed():
    """One 4-GPU node, a and b each with a nominal of 2 GPUs. a submits two 2-GPU jobs of 100 s at 0,
    b one 1-GPU job of 50 s at 0. Shared: a's first job and b's run at once (within nominal), a's
    second borrows b's unused GPU once b's job ends at 50 and finishes at 150: a spends 100 + 150.
    Alone on 2 GPUs a's jobs run one after the other: 100 + 200. b runs at once both ways."""
    nodes = _node()
    quotas = equal_quotas(nodes, ["a", "b"])
    jobs = [SimJob(id=1, project="a", arrival=0, duration=100, per_replica=Resources(2000, 1000, 1024)),
            SimJob(id=2, project="a", arrival=0, duration=100, per_replica=Resources(2000, 1000, 1024)),
            SimJob(id=3, project="b", arrival=0, duration=50, per_replica=Resources(1000, 1000, 1024))]
    shared = simulate(nodes=nodes, quotas=quotas, jobs=jobs)
    assert shared.finish_times == {1: 100, 3: 50, 2: 150}
    alone = alone_finish_times(nodes=nodes, quotas=quotas, jobs=jobs)
    assert alone == {1: 100, 2: 200, 3: 50}
    rho = project_rho(nodes=nodes, quotas=quotas, jobs=jobs, shared_finish=shared.finish_times)
    assert rho == pytest.approx({"a": 250 / 300, "b": 1.0})


def test_a_job_bigger_than_its_nominal_runs_stretched_alone():
    """a's one 4-GPU job of 100 s borrows b's idle nominal and runs at once when shared; alone on its
    2 GPUs it runs as 2 GPUs for 200 s: rho 0.5."""
    nodes = _node()
    quotas = equal_quotas(nodes, ["a", "b"])
    jobs = [SimJob(id=1, project="a", arrival=0, duration=100, per_replica=Resources(4000, 1000, 1024))]
    shared = simulate(nodes=nodes, quotas=quotas, jobs=jobs)
    assert shared.finish_times == {1: 100}
    assert project_rho(nodes=nodes, quotas=quotas, jobs=jobs, shared_finish=shared.finish_times) == {"a": 0.5}


def test_a_project_that_waits_behind_a_borrower_has_rho_above_one():
    """a's 4-GPU job of 100 s starts at 0 on the whole node, borrowing b's nominal; b's 2-GPU job of
    10 s arrives at 1 and reclaims it: a's job gets 30 s of grace to exit, b's runs 31-41. b spends
    40 s in the system against 10 s alone on its 2 GPUs: rho 4. The grace period alone puts a small
    project's rho far above 1, whatever the order."""
    nodes = _node()
    quotas = equal_quotas(nodes, ["a", "b"])
    jobs = [SimJob(id=1, project="a", arrival=0, duration=100, per_replica=Resources(4000, 1000, 1024)),
            SimJob(id=2, project="b", arrival=1, duration=10, per_replica=Resources(2000, 1000, 1024))]
    shared = simulate(nodes=nodes, quotas=quotas, jobs=jobs)
    rho = project_rho(nodes=nodes, quotas=quotas, jobs=jobs, shared_finish=shared.finish_times)
    assert shared.finish_times[2] == 41
    assert rho["b"] == pytest.approx(40 / 10)


def test_a_scarce_model_is_shared_alone_too():
    """Two P100 GPUs and two G2s; a and b each run two P100-only jobs of 100 s from 0. Shared, one of
    each project's starts at 0 and the other at 100: each spends 100 + 200. Alone each has half of
    every model, one P100: the same 100 + 200, rho 1 (with a quota over any model instead, each alone
    would hold both P100s, 100 + 100, and rho would be 1.5 for work no policy could serve faster)."""
    nodes = [NodeState(name="p", pool="sim", gpu_model="P100", allocatable=Resources(2000, 16000, 16384)),
             NodeState(name="g", pool="sim", gpu_model="G2", allocatable=Resources(2000, 16000, 16384))]
    quotas = equal_quotas(nodes, ["a", "b"])
    jobs = [SimJob(id=i, project=p, arrival=0, duration=100, per_replica=Resources(1000, 1000, 1024), gpu_model="P100")
            for i, p in ((1, "a"), (2, "a"), (3, "b"), (4, "b"))]
    shared = simulate(nodes=nodes, quotas=quotas, jobs=jobs)
    assert sorted(shared.finish_times.values()) == [100, 100, 200, 200]
    rho = project_rho(nodes=nodes, quotas=quotas, jobs=jobs, shared_finish=shared.finish_times)
    assert rho == pytest.approx({"a": 1.0, "b": 1.0})


def test_a_fraction_of_a_gpu_holds_only_what_fits_in_it():
    """One P100 node of 2 GPUs, three projects of equal nominal (0.666 GPU each): a's partition is 666
    milli of one GPU, a placeholder holds the other 334. a's two 0.5-GPU jobs of 100 s at 0 run one after
    the other alone (100 + 200), at once shared while b and c are idle (100 + 100): rho 2/3."""
    nodes = [NodeState(name="p", pool="sim", gpu_model="P100", allocatable=Resources(2000, 16000, 16384))]
    quotas = equal_quotas(nodes, ["a", "b", "c"])
    jobs = [SimJob(id=i, project="a", arrival=0, duration=100, per_replica=Resources(500, 1000, 1024)) for i in (1, 2)]
    assert alone_finish_times(nodes=nodes, quotas=quotas, jobs=jobs) == {1: 100, 2: 200}
    shared = simulate(nodes=nodes, quotas=quotas, jobs=jobs)
    assert project_rho(nodes=nodes, quotas=quotas, jobs=jobs, shared_finish=shared.finish_times) == \
        pytest.approx({"a": 200 / 300})
