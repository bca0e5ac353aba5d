"""`manage.py simulate --mixed`: a share of the nodes and GPU jobs relabelled as another vendor
and architecture; utilisation and waits reported per type."""
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.scheduling.management.commands.simulate import Command
from apps.scheduling.policy import NodeState, Resources
from apps.scheduling.simulation import SimJob, equal_quotas, mixed_cluster, per_type, simulate

from .test_simulate import needs_trace


def cluster():
    nodes = [NodeState(name=f"n{i}", pool="sim", gpu_model="V100", allocatable=Resources(8000, 96000, 10**6))
             for i in range(8)]
    jobs = [SimJob(id=i, project="ab"[i % 2], arrival=i * 10, duration=600, per_replica=Resources(8000, 8000, 1024),
                   gpu_model="V100" if i % 3 == 0 else "") for i in range(60)]
    return nodes, jobs


def test_a_share_of_nodes_and_jobs_is_relabelled_and_each_type_runs_only_on_its_nodes():
    nodes, jobs = cluster()
    mixed_nodes, mixed_jobs, node_types, job_types = mixed_cluster(nodes, jobs, share=0.25)
    assert sorted(node_types.values()).count("ascend") == 2
    assert 5 <= list(job_types.values()).count("ascend") <= 25
    keys = {n.name: n.gpu_model for n in mixed_nodes}
    assert {keys[name] for name, t in node_types.items() if t == "ascend"} == {"ascend/910B/arm64"}
    for j in mixed_jobs:
        allowed = set(j.gpu_model.split("|"))
        assert {node_types[name] for name, key in keys.items() if key in allowed} == {job_types[j.id]}
    result = simulate(nodes=mixed_nodes, quotas=equal_quotas(mixed_nodes, ["a", "b"]), jobs=mixed_jobs)
    assert result.finished == 60
    figures = per_type(result, mixed_nodes, mixed_jobs, node_types, job_types)
    assert figures["ascend"]["devices"] == 16 and figures["nvidia"]["devices"] == 48
    assert figures["ascend"]["jobs"] + figures["nvidia"]["jobs"] == 60
    assert 0 < figures["ascend"]["utilisation"] <= 1 and 0 < figures["nvidia"]["utilisation"] <= 1
    # 2 NPU nodes for a quarter of the work, 6 GPU nodes for the rest: each type queues on its own.
    assert figures["ascend"]["avg_queue_delay"] >= 0 and figures["ascend"]["started"] == figures["ascend"]["jobs"]


@pytest.mark.parametrize("text", ["1.5", "0.2:intel", "0.2:ascend:910B:sparc", "x", "0.2:a:b:c:d"])
def test_bad_mixed_option_is_a_command_error(text):
    nodes, jobs = cluster()
    with pytest.raises(CommandError):
        Command._mixed(nodes, jobs, text)


@needs_trace
def test_the_command_reports_per_type_on_the_alibaba_trace():
    out = StringIO()
    call_command("simulate", "--nodes", "20", "--limit", "300", "--time-scale", "40", "--mixed", "0.25",
                 "--json", "--no-progress", stdout=out, stderr=StringIO())
    results = json.loads(out.getvalue())
    for r in results:
        assert set(r["per_type"]) == {"ascend", "nvidia"}
        assert sum(t["jobs"] for t in r["per_type"].values()) == r["jobs"]
