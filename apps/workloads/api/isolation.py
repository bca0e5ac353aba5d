"""Refuse, with a clear reason, job specs that try to leave the sandbox Cairn gives every replica.

Replicas run as a non-root user without privilege escalation, with no host paths or host
namespaces, in their project's own namespace (Pod Security "restricted" on Kubernetes). The
serializers are strict, so such fields would be refused as "Unknown field" anyway; this says why,
and also catches them nested in lists such as `volumes`.
"""
from rest_framework import serializers

PRIVILEGE_KEYS = {"privileged", "security_context", "securitycontext", "allow_privilege_escalation",
                  "allowprivilegeescalation", "capabilities", "run_as_root", "run_as_user", "runasuser"}
HOST_PATH_KEYS = {"host_path", "hostpath"}
HOST_NAMESPACE_KEYS = {"host_network", "hostnetwork", "host_pid", "hostpid", "host_ipc", "hostipc"}
NAMESPACE_KEYS = {"namespace", "k8s_namespace", "kubernetes_namespace"}

MESSAGES = {
    "privileged": "Privileged mode and security settings cannot be requested: every replica runs as a non-root "
                  "user without privilege escalation (Pod Security \"restricted\").",
    "host_path": "Host paths cannot be mounted: replicas only see their own storage.",
    "host_namespace": "Host network, PID and IPC namespaces cannot be requested.",
    "namespace": "A workload always runs in its project's namespace; another namespace cannot be requested.",
}


def _violations(data, path: str = "") -> dict[str, str]:
    """field path -> which rule it breaks, searching nested dicts and lists."""
    found: dict[str, str] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            if not isinstance(key, str):
                continue
            name = f"{path}.{key}" if path else key
            lowered = key.lower()
            if lowered in PRIVILEGE_KEYS:
                found[name] = "privileged"
            elif lowered in HOST_PATH_KEYS:
                found[name] = "host_path"
            elif lowered in HOST_NAMESPACE_KEYS:
                found[name] = "host_namespace"
            elif lowered in NAMESPACE_KEYS and not path:
                found[name] = "namespace"
            elif key != "env":  # env values are the user's own strings
                found.update(_violations(value, name))
    elif isinstance(data, list):
        for index, item in enumerate(data[:1000]):
            found.update(_violations(item, f"{path}[{index}]"))
    return found


class IsolatedSpecMixin:
    """For workload create serializers: refuse privilege, host paths, host namespaces, namespaces."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            violations = _violations(data)
            if violations:
                field, rule = next(iter(violations.items()))
                top = field.split(".", 1)[0].split("[", 1)[0]
                raise serializers.ValidationError({top: [MESSAGES[rule]]})
        return super().to_internal_value(data)
