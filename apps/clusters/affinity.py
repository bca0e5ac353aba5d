"""Node affinity as Kubernetes writes it (a PersistentVolume's `spec.nodeAffinity.required`, a pod's
required node affinity): `nodeSelectorTerms`, each a list of `matchExpressions`. A node matches
when some term matches, and a term when every expression of it does (operators In, NotIn,
Exists, DoesNotExist, Gt, Lt). Plain data, so the scheduler (which reads Node.labels) and the
backends (which read the objects) share one reading.

`kubernetes.io/hostname` falls back to the node's name when its labels lack it (fake nodes, an
inventory recorded before the label): a local volume pinned to one host still names that node.
"""
from __future__ import annotations

HOSTNAME_LABEL = "kubernetes.io/hostname"


def terms_of(node_affinity: dict | None) -> list[dict]:
    """The required terms of a PersistentVolume's `spec.nodeAffinity` (or of a pod's
    `affinity.nodeAffinity`), each as {"matchExpressions": [...]}; [] when nothing is required."""
    required = (node_affinity or {}).get("required") or (node_affinity or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = []
    for term in required.get("nodeSelectorTerms") or []:
        expressions = [{"key": e.get("key", ""), "operator": e.get("operator", "In"),
                        "values": list(e.get("values") or [])}
                       for e in (term or {}).get("matchExpressions") or []]
        if expressions:
            terms.append({"matchExpressions": expressions})
    return terms


def _expression_matches(labels: dict, name: str, expression: dict) -> bool:
    key, operator, values = expression.get("key", ""), expression.get("operator", "In"), expression.get("values") or []
    value = labels.get(key)
    if value is None and key == HOSTNAME_LABEL:
        value = name
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and values:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def node_matches(name: str, labels: dict | None, terms: list[dict]) -> bool:
    """Whether the node `name` with `labels` meets `terms` (no terms: any node does)."""
    if not terms:
        return True
    labels = labels or {}
    return any(all(_expression_matches(labels, name, e) for e in term.get("matchExpressions") or [])
               for term in terms)


def describe_terms(terms: list[dict]) -> str:
    """For people: "topology.kubernetes.io/zone in (zone-a)" ("; or " between terms)."""
    def one(e: dict) -> str:
        values = ", ".join(e.get("values") or [])
        op = e.get("operator", "In")
        if op in ("Exists", "DoesNotExist"):
            return f"{e.get('key')} {'exists' if op == 'Exists' else 'absent'}"
        word = {"In": "in", "NotIn": "not in", "Gt": ">", "Lt": "<"}.get(op, op)
        return f"{e.get('key')} {word} ({values})" if op in ("In", "NotIn") else f"{e.get('key')} {word} {values}"

    return "; or ".join(" and ".join(one(e) for e in term.get("matchExpressions") or []) for term in terms)
