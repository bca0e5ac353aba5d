"""Network profiles (issue 42): what an admin lets a pool's training pods ask for to use a fast
network (NCCL over InfiniBand or RoCE): extra device resources (`rdma/...`), Multus secondary
networks, a few capabilities, a RuntimeClass, and the Pod Security level the project namespace
must then allow. Pure validation, shared by the model's clean(), the admin and the API.

What a profile can never grant, whatever an admin types: privileged containers, SYS_ADMIN or any
capability outside ALLOWED_CAPABILITIES, host network / PID / IPC, host paths, running as root.
The profile has no field for them, and the validation names them when they are asked for.
"""
from __future__ import annotations

import re

# Capabilities RDMA and NCCL need (locking registered memory, raising its limit, thread priority);
# nothing that administers the host or its network.
ALLOWED_CAPABILITIES = ("IPC_LOCK", "SYS_RESOURCE", "SYS_NICE")
POD_SECURITY_LEVELS = ("restricted", "baseline", "privileged")
# Pod Security admits no added capability but NET_BIND_SERVICE at "restricted", and none of the
# allowed ones at "baseline" either (its list: AUDIT_WRITE, CHOWN, ... SYS_CHROOT).
BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
# Env a profile may set in the pods (NCCL_IB_HCA, NCCL_SOCKET_IFNAME, UCX_NET_DEVICES, ...).
ENV_PREFIXES = ("NCCL_", "UCX_", "GLOO_", "TORCH_NCCL_", "NVSHMEM_")
FORBIDDEN_KEYS = {
    "privileged": "privileged containers",
    "host_network": "the host's network (hostNetwork)",
    "hostNetwork": "the host's network (hostNetwork)",
    "host_pid": "the host's PIDs", "host_ipc": "the host's IPC", "host_path": "host paths",
    "hostPID": "the host's PIDs", "hostIPC": "the host's IPC", "hostPath": "host paths",
    "run_as_root": "running as root", "security_context": "a security context of its own",
    "allow_privilege_escalation": "privilege escalation",
}
_QUALIFIED = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/"
                        r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_NETWORK = re.compile(rf"^({_DNS_LABEL}/)?{_DNS_LABEL}(@[A-Za-z0-9_.-]{{1,15}})?$")
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
# Resources Cairn sets itself (size, accelerators) or that a profile must not touch.
_RESERVED_DOMAINS = ("kubernetes.io", "k8s.io", "nvidia.com", "amd.com", "huawei.com")


class ProfileError(ValueError):
    """{field: message} of what is wrong with a profile."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def required_level(capabilities) -> str:
    """The weakest Pod Security level that admits the capabilities added."""
    caps = set(capabilities or ())
    if not caps or caps <= {"NET_BIND_SERVICE"}:
        return "restricted"
    return "baseline" if caps <= BASELINE_CAPABILITIES else "privileged"


def network_profile_clean(data: dict) -> dict:
    """The profile's fields checked and normalised; raises ProfileError naming each bad field."""
    errors: dict[str, str] = {}
    for key, what in FORBIDDEN_KEYS.items():
        if key in data:
            errors[key] = f"A network profile cannot grant {what}."
    resources = data.get("resources") or {}
    if not isinstance(resources, dict):
        errors["resources"] = "A mapping of resource name to a whole number, e.g. {\"rdma/hca_shared_devices_a\": 1}."
        resources = {}
    clean_resources = {}
    for name, amount in resources.items():
        domain = str(name).split("/", 1)[0]
        if not isinstance(name, str) or not _QUALIFIED.match(name) or len(name) > 253:
            errors["resources"] = f"'{name}' is not an extended resource name (domain/name, e.g. rdma/hca)."
        elif domain in _RESERVED_DOMAINS or domain.endswith(tuple(f".{d}" for d in _RESERVED_DOMAINS)):
            errors["resources"] = f"'{name}': resources of {domain} are Cairn's to set (size, accelerators)."
        elif isinstance(amount, bool) or not isinstance(amount, int) or not 1 <= amount <= 1_000_000:
            errors["resources"] = f"'{name}': a whole number from 1 (per replica)."
        else:
            clean_resources[name] = amount
    networks = data.get("networks") or []
    if not isinstance(networks, list) or not all(isinstance(n, str) and _NETWORK.match(n) for n in networks):
        errors["networks"] = ("A list of Multus NetworkAttachmentDefinitions: 'name', 'namespace/name' or "
                              "'name@interface'.")
    capabilities = data.get("capabilities") or []
    if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
        errors["capabilities"] = "A list of capability names."
        capabilities = []
    capabilities = sorted({c.upper().removeprefix("CAP_") for c in capabilities})
    refused = [c for c in capabilities if c not in ALLOWED_CAPABILITIES]
    if refused:
        errors["capabilities"] = (f"{', '.join(refused)} cannot be granted (SYS_ADMIN, NET_ADMIN and the like "
                                  f"administer the node); allowed: {', '.join(ALLOWED_CAPABILITIES)}.")
    runtime_class = data.get("runtime_class_name") or ""
    if runtime_class and (not isinstance(runtime_class, str) or not _DNS_SUBDOMAIN.match(runtime_class)
                          or len(runtime_class) > 253):
        errors["runtime_class_name"] = "The name of a RuntimeClass (a DNS subdomain)."
    level = data.get("pod_security_level") or "restricted"
    if level not in POD_SECURITY_LEVELS:
        errors["pod_security_level"] = f"One of {', '.join(POD_SECURITY_LEVELS)}."
    elif not refused and POD_SECURITY_LEVELS.index(level) < POD_SECURITY_LEVELS.index(required_level(capabilities)):
        errors["pod_security_level"] = (f"Pod Security '{level}' refuses pods that add {', '.join(capabilities)}: "
                                        f"it must be '{required_level(capabilities)}'.")
    env = data.get("env") or {}
    if not isinstance(env, dict):
        errors["env"] = "A mapping of variable name to value."
        env = {}
    bad_env = [k for k in env if not isinstance(k, str) or not _ENV_NAME.match(k) or not k.startswith(ENV_PREFIXES)]
    if bad_env:
        errors["env"] = f"{', '.join(map(str, bad_env))}: only variables starting with {', '.join(ENV_PREFIXES)}."
    if errors:
        raise ProfileError(errors)
    return {"resources": clean_resources, "networks": list(networks), "capabilities": capabilities,
            "runtime_class_name": runtime_class, "pod_security_level": level,
            "env": {k: str(v) for k, v in env.items()}}
