"""A network of its own for every local workload attempt (issue 44: a job on the host network
reached PostgreSQL, Redis and other projects' ranks on 127.0.0.1).

When Cairn runs as root with a run user, each attempt gets a named network namespace,
`cairn-<installation>-w<workload>-a<attempt>` (/run/netns/...), that all its replicas join
(`nsenter --net=...` before bubblewrap or setpriv). Inside:

- `lo`: the ranks rendezvous over 127.0.0.1 as before (MASTER_ADDR), and nobody else is there.
- An nftables table, loaded by Cairn (root) inside the namespace; replicas have no
  CAP_NET_ADMIN and cannot change it. Output is allowed on `lo` and refused to loopback,
  private, shared, link-local (cloud metadata 169.254.169.254), multicast and reserved ranges
  and to every address of this host, except slirp4netns' DNS forwarder 10.0.2.3:53.
- With the pool's `outbound_access` on, slirp4netns (user-mode NAT, started by netkeeper.py)
  gives the namespace a tap0 and a default route: public destinations are reachable through
  this host's own sockets, with --disable-host-loopback. No veth, no host firewall rule, no
  ip_forward: Cairn never touches the host's own network configuration. Off: loopback only.
- Cairn's API (CAIRN_PUBLIC_URL) is relayed into the namespace at the same address by
  netkeeper.py, so `cairn.init()` and checkpoints keep working; it is the only host port there.
- Notebooks and deployments are reached only through bridges that Cairn binds on the host
  (bridge.py): a unix socket (gateway) or a TCP listener on the host's loopback.

The namespace is removed (keeper killed, `ip netns del`) when no replica of its attempt is left
(`release_if_idle`, from observe), and stale ones of this installation at start-up (`sweep`).
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import ipaddress
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psutil
from django.conf import settings

from . import sandbox
from .paths import attempt_dir

logger = logging.getLogger(__name__)

NETNS_DIR = Path("/run/netns")
KEEPER = str(Path(__file__).resolve().with_name("netkeeper.py"))
SLIRP_DNS = "10.0.2.3"
_STARTING_GRACE = 120.0  # seconds a namespace is kept with no replica yet (a launch under way)
_SWEEP_EVERY = 60.0
_TIMEOUT = 30.0
_last_sweep = 0.0

# Destinations never reachable from a workload's namespace (besides this host's own addresses).
BLOCKED_V4 = ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
              "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4")
BLOCKED_V6 = ("::/127", "::ffff:0:0/96", "64:ff9b::/96", "fc00::/7", "fe80::/10", "ff00::/8")


@dataclass(frozen=True)
class Network:
    available: bool
    problem: str = ""  # why workloads share the host's network
    outbound: bool = True  # slirp4netns is installed (outbound access possible)

    def describe(self) -> str:
        if self.available:
            return ("every workload has a network namespace of its own (no host loopback, no private "
                    "addresses; outbound through slirp4netns where the pool allows it)")
        return f"workloads share the host's network ({self.problem})"


HOST = "host"
OWN = "own"


def label() -> str:
    """The node label's value (clusters.NETWORK_LABEL): workloads have their own network or share the host's."""
    return OWN if network().available else HOST


def installation_tag() -> str:
    """Names this installation's namespaces apart from another Cairn's on the same machine."""
    return hashlib.sha256(os.path.realpath(settings.CAIRN_DATA_DIR).encode()).hexdigest()[:8]


def name_for(workload_id: int, attempt: int) -> str:
    return f"cairn-{installation_tag()}-w{int(workload_id)}-a{int(attempt)}"


def path_of(name: str) -> str:
    return str(NETNS_DIR / name)


def _run(argv: list[str], *, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=_TIMEOUT)


_SYSTEM_PATH = os.pathsep.join(("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"))


@functools.cache
def _tools() -> dict[str, str | None]:
    """Absolute paths, found once (Cairn's PATH may lack /usr/sbin, where Debian puts ip and nft)."""
    return {name: shutil.which(name) or shutil.which(name, path=_SYSTEM_PATH)
            for name in ("ip", "nft", "nsenter", "unshare", "slirp4netns")}


def tool(name: str) -> str:
    return _tools()[name] or name


@functools.cache
def network() -> Network:
    """Can this host give workloads a network namespace of their own? Probed once per process
    by making one (CAIRN_SANDBOX=off turns it off with the rest of the sandbox)."""
    if settings.CAIRN["SANDBOX"] == "off":
        return Network(False, "CAIRN_SANDBOX=off")
    if os.geteuid() != 0:
        return Network(False, "Cairn is not root: it cannot create network namespaces")
    if sandbox.isolation().uid is None:  # a replica running as root could rewrite its own firewall
        return Network(False, "replicas run as root (no run user)")
    tools = _tools()
    missing = [t for t in ("ip", "nft", "nsenter", "unshare") if tools[t] is None]
    if missing:
        return Network(False, f"{', '.join(missing)} not installed (make sandbox: iproute2, nftables, util-linux)")
    probe = f"cairn-probe-{os.getpid()}"
    try:
        for argv, stdin in (([tools["ip"], "netns", "add", probe], None),
                            ([tools["ip"], "netns", "exec", probe, tools["nft"], "-f", "-"], ruleset(outbound=False)),
                            ([tools["nsenter"], f"--net={path_of(probe)}", "--", "/bin/true"], None)):
            done = _run(argv, stdin=stdin)
            if done.returncode != 0:
                return Network(False, f"`{' '.join(argv[:3])}` failed here: {done.stderr.strip()[:200]}")
    except (OSError, subprocess.SubprocessError) as exc:
        return Network(False, f"cannot create a network namespace: {exc}")
    finally:
        _run([tools["ip"], "netns", "del", probe]) if os.path.exists(path_of(probe)) else None
    return Network(True, outbound=tools["slirp4netns"] is not None)


def host_addresses() -> list[str]:
    """This host's own addresses (slirp4netns would connect to them as the host: a service
    listening on 0.0.0.0 would be reached through them)."""
    try:
        done = _run([tool("ip"), "-j", "addr", "show"])
        links = json.loads(done.stdout or "[]")
    except (OSError, subprocess.SubprocessError, ValueError):
        return []
    found = []
    for link in links:
        for info in link.get("addr_info") or []:
            try:
                found.append(str(ipaddress.ip_address(info.get("local", "").split("%")[0])))
            except ValueError:
                continue
    return found


def ruleset(*, outbound: bool, extra_blocked: list[str] = ()) -> str:
    """The namespace's nftables table: output allowed on lo (own ranks, the API relay), to the
    slirp DNS when outbound, to public addresses; refused everywhere else."""
    v4 = list(BLOCKED_V4) + [a for a in extra_blocked if ":" not in a]
    v6 = list(BLOCKED_V6) + [a for a in extra_blocked if ":" in a]
    dns = (f"    ip daddr {SLIRP_DNS} udp dport 53 accept\n"
           f"    ip daddr {SLIRP_DNS} tcp dport 53 accept\n") if outbound else ""
    return (
        "table inet cairn {\n"
        "  chain output {\n"
        "    type filter hook output priority 0; policy accept;\n"
        '    oifname "lo" accept\n'
        f"{dns}"
        f"    ip daddr {{ {', '.join(v4)} }} reject with icmpx type admin-prohibited\n"
        f"    ip6 daddr {{ {', '.join(v6)} }} reject with icmpx type admin-prohibited\n"
        "  }\n"
        "}\n"
    )


def api_relay() -> tuple[tuple[str, int], tuple[str, int]] | None:
    """(address inside, address on the host) of Cairn's API (CAIRN_PUBLIC_URL), IPv4."""
    url = urlsplit(settings.CAIRN["PUBLIC_URL"])
    if not url.hostname:
        return None
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        address = socket.getaddrinfo(url.hostname, port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except (OSError, IndexError):
        logger.warning("network namespaces: cannot resolve %s; replicas will not reach Cairn's API", url.hostname)
        return None
    return (address, port), (address, port)


def _read_state(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _keeper_alive(state: dict | None) -> psutil.Process | None:
    if not state or not state.get("pid"):
        return None
    try:
        proc = psutil.Process(int(state["pid"]))
        if abs(proc.create_time() - float(state.get("create_time") or 0)) > 0.05 or proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except psutil.Error:
        return None


class _Lock:
    """One attempt's namespace is made or removed by one process at a time."""

    def __init__(self, directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(directory / "netns.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def __enter__(self):
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


class NetworkError(Exception):
    pass


def ensure(workload_id: int, attempt: int, *, outbound: bool, run_uid: int | None = None,
           run_gid: int | None = None) -> str:
    """The path of the attempt's namespace, made (or its keeper started again, after a crash or
    when the pool's outbound access changed) if needed. Raises NetworkError."""
    directory = attempt_dir(workload_id, attempt)
    name = name_for(workload_id, attempt)
    path = path_of(name)
    state_path = directory / "netns.json"
    outbound = outbound and network().outbound
    with _Lock(directory):
        state = _read_state(state_path) or {}
        keeper = _keeper_alive(state)
        if os.path.exists(path) and keeper is not None and state.get("outbound") == outbound:
            os.utime(state_path)  # recently used: not idle
            return path
        if keeper is not None:
            _stop(keeper)
        ip = tool("ip")
        if not os.path.exists(path):
            for argv, stdin in (([ip, "netns", "add", name], None),
                                ([ip, "-n", name, "link", "set", "lo", "up"], None),
                                ([ip, "netns", "exec", name, tool("nft"), "-f", "-"],
                                 ruleset(outbound=outbound, extra_blocked=host_addresses()))):
                done = _run(argv, stdin=stdin)
                if done.returncode != 0:
                    _delete(name)
                    raise NetworkError(f"Cannot set up the workload's network ({' '.join(argv[:4])}): "
                                       f"{done.stderr.strip()[:300]}")
        relay = api_relay()
        if relay is not None and not ipaddress.ip_address(relay[0][0]).is_loopback:
            # Cairn's API at a non-loopback address: that address lives on the namespace's lo.
            _run([ip, "-n", name, "addr", "add", f"{relay[0][0]}/32", "dev", "lo"])
        pid, create_time = _start_keeper(directory, path, outbound=outbound, relay=relay, run_uid=run_uid,
                                         run_gid=run_gid)
        tmp = state_path.with_name("netns.json.tmp")
        tmp.write_text(json.dumps({"name": name, "outbound": outbound, "pid": pid, "create_time": create_time}))
        os.replace(tmp, state_path)
        logger.info("local backend: workload %s attempt %s: network namespace %s (outbound %s)",
                    workload_id, attempt, name, "on" if outbound else "off")
        return path


def _start_keeper(directory: Path, path: str, *, outbound: bool, relay, run_uid, run_gid) -> tuple[int, float]:
    argv = [sys.executable, "-I", "-S", KEEPER, "--netns", path]
    if outbound:
        argv += ["--slirp", tool("slirp4netns")]
    if relay is not None:
        (inside, upstream) = relay
        argv += ["--relay", f"{inside[0]}:{inside[1]}={upstream[0]}:{upstream[1]}"]
    if run_uid is not None:
        argv += ["--user", f"{run_uid}:{run_gid}"]
    read_end, write_end = os.pipe()
    try:
        with open(directory / "netkeeper.log", "ab") as log:
            proc = subprocess.Popen([*argv, "--notify-fd", str(write_end)], stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=log, close_fds=True, pass_fds=(write_end,), start_new_session=True)
        os.close(write_end)
        write_end = None
        with os.fdopen(read_end, "rb") as pipe:
            read_end = None
            answer = pipe.read().decode(errors="replace")
        proc.wait(timeout=_TIMEOUT)
    finally:
        for fd in (read_end, write_end):
            if fd is not None:
                os.close(fd)
    if not answer.startswith("ok "):
        raise NetworkError(f"The workload's network did not start: {answer or 'no answer'}")
    pid = int(answer.split()[1])
    try:
        return pid, psutil.Process(pid).create_time()
    except psutil.Error:
        raise NetworkError("The workload's network keeper ended at once.") from None


def _stop(proc: psutil.Process) -> None:
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=3)
    except psutil.TimeoutExpired:
        proc.kill()
    except psutil.Error:
        pass


def _delete(name: str) -> None:
    path = path_of(name)
    for proc in psutil.process_iter(["cmdline"]):  # a keeper whose state file is gone
        try:
            cmdline = proc.info["cmdline"] or []
            if KEEPER in cmdline and path in cmdline:
                proc.kill()
        except psutil.Error:
            continue
    if os.path.exists(path):
        done = _run([tool("ip"), "netns", "del", name])
        if done.returncode != 0:
            logger.warning("local backend: cannot remove network namespace %s: %s", name, done.stderr.strip())


def add_address(path: str, address: str) -> str:
    """Put `address` (one of the host's, which a notebook was told to bind) on the namespace's
    loopback, so the command can bind it there; Cairn listens on the host's. Returns it."""
    name = os.path.basename(path)
    prefix = "128" if ":" in address else "32"
    done = _run([tool("ip"), "-n", name, "addr", "add", f"{address}/{prefix}", "dev", "lo"])
    if done.returncode != 0 and "exists" not in done.stderr:
        raise NetworkError(f"Cannot give the workload's network the address {address}: {done.stderr.strip()[:200]}")
    return address


def enter_argv(path: str) -> list[str]:
    """What runs a command inside the namespace (it execs: the replica keeps the pid)."""
    return [tool("nsenter"), f"--net={path}", "--"]


def _replicas_alive(directory: Path) -> bool:
    for record_path in directory.glob("replica-*.json"):
        state = _read_state(record_path)
        if _keeper_alive(state) is not None:  # same check: pid and start time
            return True
    return False


def release_if_idle(workload_id: int, attempt: int) -> bool:
    """Remove the attempt's namespace once none of its replicas is left (a replica being started
    counts for _STARTING_GRACE after the namespace was last asked for). True if removed."""
    directory = attempt_dir(workload_id, attempt)
    name = name_for(workload_id, attempt)
    state_path = directory / "netns.json"
    if not os.path.exists(path_of(name)) and not state_path.exists():
        return False
    if not directory.is_dir():
        _delete(name)
        return True
    with _Lock(directory):
        if _replicas_alive(directory):
            return False
        # Asked for (ensure) since the last replica record was written: a replica is being
        # started (a deployment's restart, a launch filling the cache), give it time.
        records = [p.stat().st_mtime for p in directory.glob("replica-*.json")]
        try:
            touched = state_path.stat().st_mtime
        except OSError:
            touched = 0.0
        if touched > max(records, default=0.0) and time.time() - touched < _STARTING_GRACE:
            return False
        keeper = _keeper_alive(_read_state(state_path))
        if keeper is not None:
            _stop(keeper)
        _delete(name)
        state_path.unlink(missing_ok=True)
    logger.info("local backend: workload %s attempt %s: network namespace %s removed", workload_id, attempt, name)
    return True


_NAME = re.compile(r"cairn-(?P<tag>[0-9a-f]{8})-w(?P<wid>\d+)-a(?P<attempt>\d+)")


def sweep(*, force: bool = False) -> int:
    """Remove this installation's namespaces that no replica uses any more (at start-up, and
    now and then). Returns how many."""
    global _last_sweep
    if not force and time.monotonic() - _last_sweep < _SWEEP_EVERY:
        return 0
    _last_sweep = time.monotonic()
    if not network().available:
        return 0
    tag = installation_tag()
    removed = 0
    try:
        names = os.listdir(NETNS_DIR)
    except OSError:
        return 0
    for name in names:
        match = _NAME.fullmatch(name)
        if match and match["tag"] == tag:
            try:
                removed += release_if_idle(int(match["wid"]), int(match["attempt"]))
            except OSError as exc:
                logger.warning("local backend: cannot check network namespace %s: %s", name, exc)
    return removed


def remove_all() -> int:
    """Remove every namespace of this installation, in use or not (tests; a reset)."""
    tag = installation_tag()
    names = [n for n in (os.listdir(NETNS_DIR) if NETNS_DIR.is_dir() else [])
             if (m := _NAME.fullmatch(n)) and m["tag"] == tag]
    for name in names:
        _delete(name)
    return len(names)


def resolv_conf() -> str:
    """An /etc/resolv.conf for replicas with outbound access: slirp4netns' DNS forwarder (the
    host's own resolver may sit on a private or loopback address, out of reach)."""
    path = Path(settings.CAIRN_DATA_DIR) / "netns-resolv.conf"
    if not path.exists():
        tmp = path.with_name(path.name + f".{os.getpid()}")
        tmp.write_text(f"nameserver {SLIRP_DNS}\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    return str(path)
