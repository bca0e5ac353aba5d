"""`manage.py simulate`: the trace loaders, the simulator and the command."""
import json
import math
import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from apps.scheduling.management.commands.simulate import DEFAULT_TRACE_DIR
from apps.scheduling.policy import NodeState, Resources
from apps.scheduling.simulation import SimJob, equal_quotas, load_alibaba_nodes, load_alibaba_tasks, simulate
from tests.factories import NodeFactory, QuotaFactory, WorkloadFactory

TRACE = DEFAULT_TRACE_DIR
needs_trace = pytest.mark.skipif(not TRACE.exists(),
                                 reason=f"the alibaba-gpu-2023 trace is not at {TRACE} (set CAIRN_TRACE_DIR)")


def _run(*args) -> list[dict]:
    out = StringIO()
    call_command("simulate", *args, "--json", "--no-progress", stdout=out, stderr=StringIO())
    return json.loads(out.getvalue())


def test_head_of_line_blocking_is_what_fifo_pays_for():
    nodes = [NodeState(name="n1", pool="sim", allocatable=Resources(4000, 64000, 10**6))]
    jobs = [SimJob(id=1, project="a", arrival=0, duration=100, per_replica=Resources(2000, 1000, 1024)),
            SimJob(id=2, project="a", arrival=1, duration=10, per_replica=Resources(4000, 1000, 1024)),
            SimJob(id=3, project="b", arrival=2, duration=10, per_replica=Resources(1000, 1000, 1024))]
    quotas = equal_quotas(nodes, ["a", "b"])
    fifo = simulate(nodes=nodes, quotas=quotas, jobs=jobs, policy="fifo")
    cairn = simulate(nodes=nodes, quotas=quotas, jobs=jobs, policy="cairn")
    assert fifo.finished == cairn.finished == 3
    assert fifo.avg_queue_delay == pytest.approx((0 + 99 + 108) / 3)  # job 3 waits behind job 2
    assert cairn.avg_queue_delay == pytest.approx((0 + 99 + 0) / 3)  # job 3 backfills beside job 1
    assert 0 < cairn.utilisation <= 1 and cairn.fairness <= 1


def test_waits_are_reported_per_priority_class():
    nodes = [NodeState(name="n1", pool="sim", allocatable=Resources(4000, 64000, 10**6))]
    jobs = [SimJob(id=1, project="a", arrival=0, duration=100, per_replica=Resources(2000, 1000, 1024), priority=3),
            SimJob(id=2, project="a", arrival=1, duration=10, per_replica=Resources(4000, 1000, 1024), priority=4),
            SimJob(id=3, project="b", arrival=2, duration=10, per_replica=Resources(1000, 1000, 1024), priority=4),
            SimJob(id=4, project="b", arrival=3, duration=10, per_replica=Resources(1000, 1000, 1024), priority=2)]
    quotas = equal_quotas(nodes, ["a", "b"])
    fifo = simulate(nodes=nodes, quotas=quotas, jobs=jobs, policy="fifo")
    cairn = simulate(nodes=nodes, quotas=quotas, jobs=jobs, policy="cairn")
    # FIFO: job 2 waits 99 s for the whole node, jobs 3 and 4 wait behind it until 110.
    assert fifo.priority_delay[4] == {"jobs": 2, "avg": (99 + 108) / 2, "p99": 108, "max": 108}
    assert fifo.priority_delay[2]["avg"] == 107 and fifo.priority_delay[3]["avg"] == 0
    # Cairn: jobs 3 and 4 start beside job 1 at once; only the whole-node job waits.
    assert cairn.priority_delay[4]["avg"] == pytest.approx(99 / 2) and cairn.priority_delay[4]["max"] == 99
    assert cairn.priority_delay[2] == {"jobs": 1, "avg": 0, "p99": 0, "max": 0}
    assert cairn.as_dict()["priorities"]["P4"]["max"] == 99


def test_priority_preemption_in_simulation_requeues_and_finishes_everything():
    nodes = [NodeState(name="n1", pool="sim", allocatable=Resources(2000, 64000, 10**6))]
    jobs = [SimJob(id=1, project="a", arrival=0, duration=100, per_replica=Resources(2000, 1000, 1024), priority=5),
            SimJob(id=2, project="a", arrival=10, duration=10, per_replica=Resources(2000, 1000, 1024), priority=0)]
    result = simulate(nodes=nodes, quotas=equal_quotas(nodes, ["a"]), jobs=jobs, grace_seconds=5)
    assert result.preemptions == 1 and result.finished == 2
    # Job 1 runs 0-10, checkpoints until 15; job 2 runs 15-25; job 1 resumes its last 90 s at 25.
    assert result.avg_jct == pytest.approx((115 + 15) / 2)


@pytest.mark.parametrize(("checkpoint_seconds", "lost", "low_end"), [
    (None, 0, 115),  # checkpoints at SIGTERM: resumes its last 90 s at 25
    (4, 2, 117),  # checkpointed at 4 and 8 s: redoes 2 s, resumes 92 s at 25
    (math.inf, 10, 125),  # never checkpoints: starts over at 25
])
def test_preempted_work_since_the_last_checkpoint_is_lost_and_run_again(checkpoint_seconds, lost, low_end):
    nodes = [NodeState(name="n1", pool="sim", allocatable=Resources(2000, 64000, 10**6))]
    jobs = [SimJob(id=1, project="a", arrival=0, duration=100, per_replica=Resources(2000, 1000, 1024), priority=5),
            SimJob(id=2, project="a", arrival=10, duration=10, per_replica=Resources(2000, 1000, 1024), priority=0)]
    result = simulate(nodes=nodes, quotas=equal_quotas(nodes, ["a"]), jobs=jobs, grace_seconds=5,
                      checkpoint_seconds=checkpoint_seconds)
    assert result.preemptions == result.most_preemptions == result.preemptions_within_project == 1
    assert result.finished == 2
    assert result.avg_jct == pytest.approx((low_end + 15) / 2)
    assert result.preempted_gpu_hours == pytest.approx(2 * 10 / 3600)  # 2 GPUs had run 10 s
    assert result.redone_gpu_hours == pytest.approx(2 * lost / 3600)
    # The work run again is allocated GPU-time but not the job's: the slowdown ratio counts only
    # the job's own run time against its time in the system.
    assert result.project_service["a"] == pytest.approx((2 * 100 + 2 * 10) / (2 * low_end + 2 * 15))


def test_a_replay_cut_short_is_measured_up_to_its_time_limit():
    nodes = [NodeState(name="n1", pool="sim", allocatable=Resources(2000, 64000, 10**6))]
    jobs = [SimJob(id=1, project="a", arrival=0, duration=100, per_replica=Resources(1000, 1000, 1024)),
            SimJob(id=2, project="a", arrival=1000, duration=10, per_replica=Resources(1000, 1000, 1024))]
    cut = simulate(nodes=nodes, quotas=equal_quotas(nodes, ["a"]), jobs=jobs, time_limit=200)
    assert cut.finished == 1 and cut.unfinished == 1
    # One of two GPUs for 100 s of the 200 simulated: not of the 1,000 s the arrivals span.
    assert cut.utilisation == pytest.approx(0.25) and cut.utilisation_makespan == pytest.approx(0.25)
    whole = simulate(nodes=nodes, quotas=equal_quotas(nodes, ["a"]), jobs=jobs)
    assert whole.finished == 2 and whole.utilisation == pytest.approx(100 / 2000)


def test_checkpoint_interval_and_time_limit_must_be_positive():
    with pytest.raises(ValueError, match="must be positive"):
        simulate(nodes=[], quotas=[], jobs=[], checkpoint_seconds=0)
    with pytest.raises(CommandError, match="expected a positive number of seconds, or 'inf'"):
        _run("--nodes", "10", "--limit", "10", "--checkpoint-every", "0")
    with pytest.raises(CommandError, match="--time-limit -5: expected a positive number of seconds"):
        _run("--nodes", "10", "--limit", "10", "--time-limit", "-5")


@needs_trace
def test_the_command_replays_jobs_that_lose_their_work_when_preempted():
    # 5 nodes are small enough for the first 300 pods to preempt one another.
    kept = _run("--nodes", "5", "--limit", "300", "--policy", "cairn")[0]
    lost = _run("--nodes", "5", "--limit", "300", "--policy", "cairn", "--checkpoint-every", "inf")[0]
    assert kept["finished"] == lost["finished"] == 300
    assert kept["preemptions"] > 0 and kept["preempted_gpu_hours"] > 0 and kept["redone_gpu_hours"] == 0
    assert lost["preemptions"] > 0 and lost["preempted_gpu_hours"] > 0
    assert lost["redone_gpu_hours"] == pytest.approx(lost["preempted_gpu_hours"])  # nothing was kept
    assert 1 <= lost["most_preemptions"] <= lost["preemptions"]


@needs_trace
def test_the_command_stops_at_the_time_limit_and_reports_what_ran():
    cut = _run("--nodes", "10", "--limit", "300", "--policy", "cairn", "--time-limit", "10000000")[0]
    assert 0 < cut["finished"] < 300 and cut["unfinished"] == 300 - cut["finished"]


def test_a_preemptor_waits_for_its_exiting_victims_instead_of_preempting_more():
    nodes = [NodeState(name="n1", pool="sim", allocatable=Resources(2000, 64000, 10**6))]
    one = Resources(1000, 1000, 1024)
    jobs = [SimJob(id=1, project="a", arrival=0, duration=1000, per_replica=one),
            SimJob(id=2, project="a", arrival=1, duration=1000, per_replica=one),  # borrows b's idle GPU
            SimJob(id=3, project="b", arrival=100, duration=10, per_replica=one),  # reclaims it
            SimJob(id=4, project="a", arrival=110, duration=10, per_replica=one)]  # a cycle in the grace period
    result = simulate(nodes=nodes, quotas=equal_quotas(nodes, ["a", "b"]), jobs=jobs, grace_seconds=30)
    assert result.preemptions == 1 and result.finished == 4
    assert result.preemptions_within_project == 0  # b reclaimed its nominal from a
    assert result.delays[3] == 30  # admitted when its one victim has exited


@needs_trace
def test_loaders_read_the_alibaba_trace():
    nodes = load_alibaba_nodes(TRACE / "openb_node_list_gpu_node.csv")
    assert len(nodes) == 1213 and sum(n.allocatable.gpu_milli for n in nodes) == 6212 * 1000
    jobs = load_alibaba_tasks(TRACE / "openb_pod_list_gpuspec33.csv", limit=2000)
    assert any(0 < j.per_replica.gpu_milli < 1000 for j in jobs)
    assert any(j.gpu_model and "|" in j.gpu_model for j in load_alibaba_tasks(TRACE / "openb_pod_list_gpuspec33.csv"))
    assert {j.priority for j in jobs} <= {1, 2, 3, 4}
    # A seed is another assignment of the same pods to projects; seed 0 is the unsalted one.
    again = load_alibaba_tasks(TRACE / "openb_pod_list_gpuspec33.csv", limit=2000)
    seeded = load_alibaba_tasks(TRACE / "openb_pod_list_gpuspec33.csv", limit=2000, seed=3)
    assert [j.project for j in again] == [j.project for j in jobs]
    assert [(j.id, j.duration) for j in seeded] == [(j.id, j.duration) for j in jobs]
    moved = sum(a.project != b.project for a, b in zip(jobs, seeded, strict=True))
    assert 0.8 * len(jobs) < moved < len(jobs)  # about 7 in 8 change project
    assert {j.project for j in seeded} == {f"project-{i:02d}" for i in range(8)}


@needs_trace
def test_command_replays_the_trace_with_both_policies(tmp_path):
    chart = tmp_path / "sim.png"
    out = StringIO()
    call_command("simulate", "--nodes", "10", "--limit", "300", "--no-progress", "--chart", str(chart),
                 stdout=out, stderr=StringIO())
    assert "average queueing delay" in out.getvalue() and chart.stat().st_size > 1000
    table = out.getvalue().split("per priority class", 1)[1].split("\n\n", 1)[0].splitlines()
    assert "wait cairn (s)" in table[0] and "p99 fifo (s)" in table[0]
    rows = {line.split()[0]: int(line.split()[1]) for line in table[1:]}
    assert sum(rows.values()) == 300 and all(name.startswith("P") for name in rows)  # every job, once
    results = _run("--nodes", "10", "--limit", "300", "--policy", "cairn")
    assert results[0]["policy"] == "cairn" and results[0]["finished"] == 300
    assert sum(p["jobs"] for p in results[0]["priorities"].values()) == 300
    # --seed replays the same pods under another assignment to projects: per-project figures move.
    seeded = _run("--nodes", "10", "--limit", "300", "--policy", "cairn", "--seed", "1")
    assert seeded[0]["finished"] == 300
    assert seeded[0]["projects"] != results[0]["projects"]


@needs_trace
def test_the_data_replay_reports_hit_rate_fills_and_wait_per_locality_bound():
    out = StringIO()
    call_command("simulate", "--nodes", "8", "--limit", "300", "--policy", "cairn", "--datasets", "10",
                 "--locality-wait", "0", "30", "--no-progress", stdout=out, stderr=StringIO())
    text = out.getvalue().split("datasets:", 1)[1]
    rates = {label.strip(): float(rate) for label, rate in re.findall(r"\n  (\S[^\n]*?)\s+hit rate\s+([\d.]+)%", text)}
    assert set(rates) == {"placement ignoring caches", "data-aware placement", "delay scheduling, 30 s"}  # 0: none
    assert rates["delay scheduling, 30 s"] > rates["data-aware placement"]
    held = re.search(r"held back for data: (\d+) of 300 jobs, median [\d,]+ s, max ([\d,]+) s", text)
    assert held and int(held.group(2).replace(",", "")) <= 30  # never past the bound
    assert "GB filled" in text and "added / run time: median" in text


def test_gpu_node_reserve_outside_zero_to_one_is_a_command_error():
    with pytest.raises(CommandError, match="expected a share from 0 to 1"):
        _run("--nodes", "10", "--limit", "10", "--gpu-node-reserve", "1.5")


def test_bad_quota_override_is_a_command_error(pool):
    NodeFactory(pool=pool, name="n1", gpu_count=4, health="healthy")
    WorkloadFactory(pool=pool, status="succeeded", started_at=timezone.now(), finished_at=timezone.now())
    with pytest.raises(CommandError, match="PROJECT=GPUS"):
        _run("--from-db", pool.name, "--quota", "vision")


@pytest.mark.django_db
def test_an_admin_tries_a_quota_change_on_the_pools_own_history(project, pool):
    NodeFactory(pool=pool, name="n1", gpu_count=4, cpu_milli_allocatable=64000, memory_mb_allocatable=10**6,
                health="healthy")
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=2000, borrowing_limit_gpu_milli=0)
    now = timezone.now()
    for i in range(4):
        WorkloadFactory(project=project, pool=pool, status="succeeded", gpu_milli=2000, name=f"j{i}",
                        started_at=now - timedelta(hours=3), finished_at=now - timedelta(hours=2))
    today = _run("--from-db", pool.name, "--policy", "cairn")[0]
    bigger = _run("--from-db", pool.name, "--policy", "cairn", "--quota", f"{project.slug}=4")[0]
    assert today["finished"] == bigger["finished"] == 4
    assert bigger["avg_queue_delay"] < today["avg_queue_delay"]
    # Per project, as the admin reads it: this project's own jobs wait less.
    assert bigger["projects"][project.slug]["avg_queue_delay"] < today["projects"][project.slug]["avg_queue_delay"]
    out = StringIO()
    call_command("simulate", "--from-db", pool.name, "--policy", "cairn", "--no-progress", stdout=out, stderr=StringIO())
    row = next(line for line in out.getvalue().splitlines() if line.startswith(project.slug))
    assert row.split()[1:3] == ["4", "8.0"]  # 4 jobs of 2 GPUs for an hour each
    assert f"{today['projects'][project.slug]['avg_queue_delay']:,.0f}" in row.split()
    with pytest.raises(CommandError, match="Unknown resource pool"):
        _run("--from-db", "nope")


def _replay_history(project, pool, *, node_gpus: int, nominal_gpu_milli: int, jobs) -> list[str]:
    """The pool's history (one node; `jobs` of (name, gpu_milli, replicas), each an hour long)
    replayed under Cairn's policy by the command: its output lines."""
    NodeFactory(pool=pool, name="n1", gpu_count=node_gpus, cpu_milli_allocatable=64000, memory_mb_allocatable=10**6,
                health="healthy")
    QuotaFactory(project=project, pool=pool, nominal_gpu_milli=nominal_gpu_milli)
    now = timezone.now()
    for name, gpus, replicas in jobs:
        WorkloadFactory(project=project, pool=pool, status="succeeded", gpu_milli=gpus, replicas=replicas, name=name,
                        started_at=now - timedelta(hours=3), finished_at=now - timedelta(hours=2))
    out = StringIO()
    call_command("simulate", "--from-db", pool.name, "--policy", "cairn", "--no-progress", stdout=out, stderr=StringIO())
    return out.getvalue().splitlines()


@pytest.mark.django_db
def test_the_per_project_table_counts_jobs_that_never_started(project, pool):
    # 8 GPUs fit on no node: that job never starts.
    lines = _replay_history(project, pool, node_gpus=4, nominal_gpu_milli=16000,
                            jobs=[("fits", 2000, 1), ("too-big", 8000, 1)])
    assert "unstarted cairn" in next(line for line in lines if line.startswith("per project"))
    assert next(line for line in lines if line.startswith(project.slug)).split()[-1] == "1"
    # And why: the job too big for any node (but not for the quota) waited as one that never fits.
    reasons = lines.index("GPU-hours waiting, by pending reason (cairn)")
    assert lines[reasons + 1].split() == ["project", "never", "fits"]
    assert lines[reasons + 2].split()[0] == project.slug and float(lines[reasons + 2].split()[1]) > 0
    assert not any("bigger than their project's nominal" in line for line in lines)  # 16 GPUs of nominal


@pytest.mark.django_db
def test_the_command_names_jobs_bigger_than_their_projects_nominal(project, pool):
    lines = _replay_history(project, pool, node_gpus=8, nominal_gpu_milli=3000,
                            jobs=[("small", 2000, 1), ("wide", 4000, 1), ("gang", 2000, 4), ("fits", 1000, 3)])
    heading = next(i for i, line in enumerate(lines) if line.startswith("jobs bigger than their project's nominal"))
    assert lines[heading + 1].split() == [project.slug, "2", "jobs", "of", "4-8", "GPUs,", "nominal", "3", "on", "pool",
                                          pool.name]


def test_max_min_fair_shares_cap_each_project_at_what_it_asks_for():
    from apps.scheduling.simulation import jain, max_min_shares

    equal = {"a": 1.0, "b": 1.0, "c": 1.0}
    assert max_min_shares(10, {"a": 2, "b": 10, "c": 10}, equal) == pytest.approx({"a": 2, "b": 4, "c": 4})
    assert max_min_shares(10, {"a": 2, "b": 3, "c": 0}, equal) == pytest.approx({"a": 2, "b": 3, "c": 0})
    # Weighted by nominal: b is entitled to three times a's share.
    assert max_min_shares(8, {"a": 8, "b": 8}, {"a": 1, "b": 3}) == pytest.approx({"a": 2, "b": 6})
    assert jain([1, 1, 1]) == pytest.approx(1.0) and jain([1, 0]) == pytest.approx(0.5)


def _a_floods_b_arrives() -> tuple[list[NodeState], list, list[SimJob]]:
    """Two GPUs, two projects with equal nominals. a floods the queue first; b's job arrives later."""
    nodes = [NodeState(name="n1", pool="sim", allocatable=Resources(2000, 64000, 10**6))]
    jobs = [SimJob(id=i, project="a", arrival=i, duration=100, per_replica=Resources(1000, 1000, 1024))
            for i in range(1, 7)]
    jobs.append(SimJob(id=9, project="b", arrival=10, duration=100, per_replica=Resources(1000, 1000, 1024)))
    return nodes, equal_quotas(nodes, ["a", "b"]), jobs


def test_share_fairness_sees_one_project_crowding_out_another():
    nodes, quotas, jobs = _a_floods_b_arrives()
    fifo = simulate(nodes=nodes, quotas=quotas, jobs=jobs, policy="fifo")
    cairn = simulate(nodes=nodes, quotas=quotas, jobs=jobs, policy="cairn")
    # FIFO runs all of a's jobs before b's; Cairn's fair share runs b's when a GPU first frees.
    assert fifo.delays[9] > 200 and cairn.delays[9] < 100
    assert cairn.share_fairness > fifo.share_fairness
    assert set(cairn.project_share) == {"a", "b"}


def test_waiting_gpu_time_is_split_by_the_pending_reason_the_policy_gave():
    nodes, quotas, jobs = _a_floods_b_arrives()  # b's job reclaims its nominal GPU from a's borrowed one
    cairn = simulate(nodes=nodes, quotas=quotas, jobs=jobs, policy="cairn", grace_seconds=30)
    # b waited only for its victim's grace period, on 1 GPU.
    assert cairn.project_waits["b"] == pytest.approx({"preempting": 30 / 3600})
    # a's queued jobs waited because a had borrowed all there was to borrow.
    assert max(cairn.project_waits["a"], key=cairn.project_waits["a"].get) == "quota_lendable"
    fifo = simulate(nodes=nodes, quotas=quotas, jobs=jobs, policy="fifo")
    assert set(fifo.project_waits) == {"a", "b"} and all(set(k) == {"fifo"} for k in fifo.project_waits.values())
    # Without preemption every GPU-second pending is one job's queueing delay: the split adds up.
    for project in ("a", "b"):
        delays = sum(fifo.delays[j.id] * j.per_replica.gpu_milli / 1000 for j in jobs if j.project == project)
        assert sum(fifo.project_waits[project].values()) * 3600 == pytest.approx(delays)


def test_the_wait_table_heads_its_columns_with_labels_for_people():
    from types import SimpleNamespace

    from apps.scheduling.management.commands.simulate import Command

    out = StringIO()
    command = Command(stdout=out)
    command._wait_reasons(SimpleNamespace(policy="cairn", project_waits={
        "a": {"quota_lendable": 2.0, "not_yet_decided": 0.5}, "b": {"capacity": 1.0}}))
    lines = out.getvalue().splitlines()
    assert lines[1] == "GPU-hours waiting, by pending reason (cairn)"
    assert "quota: nothing left to borrow" in lines[2] and "not yet decided" in lines[2] and "quota_" not in lines[2]
    assert lines[3].split() == ["a", "2.0", "0.0", "0.5"] and lines[4].split() == ["b", "0.0", "1.0", "0.0"]


def test_the_simulator_gives_the_policy_each_projects_decayed_service(monkeypatch):
    # One GPU; a's and b's 1-GPU jobs arrive at 0 and run 100 s each; a's goes first (submitted first).
    # At 100 s, when a's ends, a held the GPU for its 100 s in the system and b held nothing for its
    # 100 s: without decay (a half-life of 1e12 s) the policy sees (100, 100) and (0, 100); with a
    # half-life of 100 s each second counts 2 ** -(age / 100): 100 / ln 2 * (1 - 1/2) = 72.13.
    from apps.scheduling import simulation

    seen = []

    def recording(snapshot, options=None, *, cluster=None):
        seen.append((snapshot.now, dict(snapshot.project_service or {})))
        return simulation.schedule(snapshot, options, cluster=cluster)

    monkeypatch.setitem(simulation.POLICIES, "cairn", recording)
    nodes = [NodeState(name="n1", pool="sim", allocatable=Resources(1000, 8000, 8192))]
    jobs = [SimJob(id=1, project="a", arrival=0.0, duration=100.0, per_replica=Resources(1000, 1000, 1024)),
            SimJob(id=2, project="b", arrival=0.0, duration=100.0, per_replica=Resources(1000, 1000, 1024))]
    for half_life, expected in [(1e12, 100.0), (100.0, 100 / math.log(2) * 0.5)]:
        seen.clear()
        result = simulate(nodes=nodes, quotas=equal_quotas(nodes, {"a", "b"}), jobs=jobs, service_half_life=half_life)
        assert result.finished == 2
        at_100 = next(service for now, service in seen if (now - simulation.EPOCH).total_seconds() == 100)
        assert at_100[("sim", "a")] == (pytest.approx(expected), pytest.approx(expected))
        assert at_100[("sim", "b")] == (pytest.approx(0.0), pytest.approx(expected))


def test_a_half_life_that_is_not_positive_is_a_command_error():
    with pytest.raises(CommandError, match="--service-half-life 0: expected a positive number of seconds"):
        _run("--nodes", "10", "--limit", "10", "--service-half-life", "0")


def test_a_negative_time_slice_is_a_command_error():
    with pytest.raises(CommandError, match="--timeslice -1: expected 0 \\(off\\) or a positive number of seconds"):
        _run("--nodes", "10", "--limit", "10", "--timeslice", "-1")
