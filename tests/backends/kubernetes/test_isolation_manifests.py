"""B5, isolation: the NetworkPolicies and the RoleBinding of a project namespace, as built (pure,
validated against the Kubernetes schemas). No CNI enforces them in the tests: the objects and
their selectors are what is asserted (test_real_blockers.py checks they reach a real API server)."""
from apps.backends.kubernetes.manifests import (
    ClusterOptions,
    network_policies,
    project_role_binding,
    rank_network_policy,
    rbac_subject,
    workload_manifests,
)

from .test_manifests import validate, view


def by_name(objects):
    return {o["metadata"]["name"]: o for o in objects}


def test_a_project_namespace_denies_everything_but_dns_cairn_and_its_services():
    options = ClusterOptions(cairn_cidrs=("192.0.2.10/32",), egress_cidrs=("0.0.0.0/0",))
    policies = by_name(network_policies("vision", options))
    for policy in policies.values():
        validate(policy)
        assert policy["metadata"]["namespace"] == "cairn-vision"
    deny = policies["cairn-default-deny"]["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}  # no rule: nothing allowed
    egress = policies["cairn-egress"]["spec"]["egress"]
    assert egress[0]["ports"] == [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    assert egress[0]["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    cairn = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "cairn-system"}},
             "podSelector": {"matchLabels": {"app.kubernetes.io/name": "cairn"}}}
    assert egress[1]["to"] == [cairn, {"ipBlock": {"cidr": "192.0.2.10/32"}}]
    assert egress[2]["to"] == [{"ipBlock": {"cidr": "0.0.0.0/0"}}]
    ingress = policies["cairn-from-cairn"]["spec"]
    # the gateway reaches deployments, the proxy and the culler notebooks: only from Cairn's pods
    assert ingress["podSelector"] == {"matchExpressions": [
        {"key": "cairn.dev/kind", "operator": "In", "values": ["deployment", "notebook"]}]}
    assert ingress["ingress"] == [{"from": [cairn, {"ipBlock": {"cidr": "192.0.2.10/32"}}]}]
    # nothing lets another namespace's pods (or this one's training pods) in
    assert not any("ingress" in p["spec"] for name, p in policies.items() if name != "cairn-from-cairn")


def test_cairns_own_pods_carry_the_labels_the_policies_select():
    from pathlib import Path

    import yaml

    cairn = Path(__file__).resolve().parents[3] / "platform" / "kubernetes" / "cairn.yaml"
    deployments = [d for d in yaml.safe_load_all(cairn.read_text()) if d and d["kind"] == "Deployment"]
    web = [d for d in deployments if d["metadata"]["name"] in ("cairn-web", "cairn-worker")]
    assert len(web) == 2
    for d in web:
        assert d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "cairn"


def test_the_ranks_of_a_training_job_reach_each_other_only():
    [policy] = rank_network_policy(view(), ClusterOptions())
    validate(policy)
    own = {"matchLabels": {"cairn.dev/workload": "42"}}
    assert policy["metadata"]["name"] == "cairn-42-ranks"
    assert policy["spec"]["podSelector"] == own
    assert policy["spec"]["ingress"] == [{"from": [{"podSelector": own}]}]
    assert policy["spec"]["egress"] == [{"to": [{"podSelector": own}]}]
    kinds = [o["kind"] for o in workload_manifests(view(), ClusterOptions())]
    assert kinds.index("NetworkPolicy") < kinds.index("Job")  # in place before the pods


def test_network_policies_can_be_turned_off():
    options = ClusterOptions(network_policies=False)
    assert network_policies("vision", options) == [] and rank_network_policy(view(), options) == []


def test_cairn_binds_itself_the_project_role_in_the_namespace_only():
    binding = project_role_binding("vision", ClusterOptions(), rbac_subject("system:serviceaccount:cairn-system:cairn"))
    validate(binding)
    assert binding["kind"] == "RoleBinding" and binding["metadata"]["namespace"] == "cairn-vision"
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "cairn-project"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "cairn", "namespace": "cairn-system"}]
    assert rbac_subject("alice@example.com") == {"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                                 "name": "alice@example.com"}


def test_dispatch_binds_the_role_and_creates_the_policies_even_in_a_namespace_cairn_may_not_create(
        emulator, make_workload):
    """A namespace an administrator created beforehand, with Cairn not allowed to create
    namespaces (403): Cairn reads it and goes on. (Emulated API server: the 403 is injected.)"""
    from apps.backends.services import workload_dispatch
    from apps.workloads.models import Workload

    ns = "cairn-vision"
    emulator.create("namespaces", {"metadata": {"name": ns}})
    emulator.fail("POST", "/api/v1/namespaces", 403, times=1)  # the first POST of a launch: the namespace
    workload = make_workload(kind="training", replicas=2)
    workload_dispatch(workload_id=workload.pk)
    assert Workload.objects.get(pk=workload.pk).status == "running"
    binding = emulator.get("rolebindings", ns, "cairn")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "cairn", "namespace": "cairn-system"}]
    names = {p["metadata"]["name"] for p in emulator.list("networkpolicies", ns)}
    assert names == {"cairn-default-deny", "cairn-egress", "cairn-from-cairn", f"cairn-{workload.pk}-ranks"}
    assert "labels" not in emulator.get("namespaces", "", ns)["metadata"]  # not Cairn's to relabel
