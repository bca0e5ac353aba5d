"""Pure helpers: the environment and argv of a replica (local processes, Slurm steps). No I/O,
unit-tested directly."""
import math
import os
import re
import sys
from collections.abc import Mapping, Sequence

# Keys the backend sets itself; the user's env cannot override them (nor anything CAIRN_*).
RESERVED_KEYS = frozenset({
    "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK",
    "CUDA_VISIBLE_DEVICES", "PORT", *("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES"),
})
# The devices a replica may use, in each vendor's variable (a machine has one vendor's devices:
# the others' variables are set alike and unused). NVIDIA: CUDA; AMD: HIP and ROCr; Ascend: ACL.
DEVICE_VISIBILITY_KEYS = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                          "ASCEND_RT_VISIBLE_DEVICES")
RESERVED_PREFIX = "CAIRN_"

# What a replica inherits from Cairn's own environment. Nothing else: Cairn's environment holds
# secrets (DATABASE_URL, SECRET_KEY, ...) that user code must not see.
INHERITED_KEYS = ("HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "SHELL", "TERM", "LD_LIBRARY_PATH")


def is_reserved(key: str) -> bool:
    return key in RESERVED_KEYS or key.startswith(RESERVED_PREFIX)


def inherited_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The part of Cairn's environment a replica gets, with Cairn's Python first on PATH.

    Locally, `python` in a command means the interpreter Cairn runs on (with the `cairn` SDK).
    """
    environ = os.environ if environ is None else environ
    env = {k: v for k, v in environ.items() if k in INHERITED_KEYS or k.startswith("LC_")}
    python_bin = os.path.dirname(sys.executable)
    path = environ.get("PATH", os.defpath)
    env["PATH"] = python_bin + os.pathsep + path if path else python_bin
    env["PYTHONUNBUFFERED"] = "1"  # live logs; the user may turn it off
    return env


def reserved_env(
    *, workload_id: int, workload_name: str, kind: str, project: str, api_url: str, attempt: int,
    replica: int, replicas: int, master_port: int, gpus: Sequence[int], port: int | None = None,
) -> dict[str, str]:
    """What a distributed launcher expects, plus what the `cairn` SDK reads. All on one node."""
    env = {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master_port),
        "WORLD_SIZE": str(replicas),
        "RANK": str(replica),
        "LOCAL_RANK": str(replica),
        "LOCAL_WORLD_SIZE": str(replicas),
        "NODE_RANK": "0",
        **dict.fromkeys(DEVICE_VISIBILITY_KEYS, ",".join(str(g) for g in gpus)),
        "CAIRN_API_URL": api_url,
        "CAIRN_PROJECT": project,
        "CAIRN_WORKLOAD_ID": str(workload_id),
        "CAIRN_WORKLOAD_NAME": workload_name,
        "CAIRN_KIND": kind,
        "CAIRN_ATTEMPT": str(attempt),
        "CAIRN_REPLICA": str(replica),
    }
    if port is not None:
        env["PORT"] = str(port)
    return env


def replica_env(
    *, base: Mapping[str, str], user: Mapping[str, str] | None, reserved: Mapping[str, str]
) -> tuple[dict[str, str], list[str]]:
    """base, then the user's env, then the reserved keys. Returns (env, user keys ignored)."""
    user = user or {}
    ignored = sorted(k for k in user if is_reserved(k))
    env = dict(base)
    env.update({str(k): str(v) for k, v in user.items() if not is_reserved(k)})
    env.update(reserved)
    return env, ignored


_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand_command(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """Expand `$(VAR)` in each argument from env, as Kubernetes does; `$$` is a literal `$`.

    Unknown references are left as they are. No shell is involved (`$VAR` stays literal).
    """

    def substitute(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return [_REFERENCE.sub(substitute, str(arg)) for arg in argv]


def replica_gpus(*, replica: int, gpu_milli: int, placement: Mapping | None, node_gpu_count: int) -> list[int]:
    """GPU indices for CUDA_VISIBLE_DEVICES: the placement's when it names them, else packed in order."""
    if gpu_milli <= 0:
        return []
    if placement and placement.get("gpus") is not None:
        return [int(g) for g in placement["gpus"]]
    per_replica = max(1, math.ceil(gpu_milli / 1000))
    first = replica * per_replica
    indices = range(first, first + per_replica)
    if node_gpu_count > 0:
        return sorted({i % node_gpu_count for i in indices})
    return list(indices)
