"""A real Slurm for the tests: Debian's munged, slurmctld and one slurmd per node, all on this
machine, started as child processes with a private configuration in one temporary directory
(`make slurm` installs the packages). Nothing of the machine's own /etc/slurm or /run/munge is
used: every command reaches this cluster through SLURM_CONF (the client commands) and the munge
socket named in its AuthInfo.

Several nodes on one host are several slurmd daemons (Debian builds Slurm with
--enable-multiple-slurmd): each node has a NodeName, the address 127.0.0.1 and a port of its
own, and its daemon is started with `slurmd -N <name>`. No front-end nodes.

GPUs are GRES of type gpu. Each node's devices are character devices made with mknod in the
temporary directory (the numbers of /dev/null: nothing can use them), so slurmd binds them like
real ones and sets CUDA_VISIBLE_DEVICES in the steps it starts. Where mknod is not allowed the
GRES are declared by Count only (Slurm then counts them and sets no CUDA_VISIBLE_DEVICES).

Slurm runs without cgroups (a container has no delegated cgroup tree): ProctrackType
proctrack/linuxproc follows a step's processes by parenthood, TaskPlugin task/none binds
nothing. No slurmdbd: finished jobs are read from slurmctld's memory (MinJobAge) and each rank's
exit code from the file the batch script writes (apps/backends/slurm/script.py).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "sinfo", "scontrol", "srun")
PARTITION = "cairn"


class SlurmError(RuntimeError):
    pass


@dataclass(frozen=True)
class TestNode:
    name: str
    cpus: int = 8
    memory_mb: int = 16000
    gpus: int = 2
    gpu_type: str = "h100"


DEFAULT_NODES = (TestNode("sn1"), TestNode("sn2"), TestNode("sn3", gpus=0))


def missing_programs() -> list[str]:
    return [name for name in (*DAEMONS, *CLIENTS) if shutil.which(name) is None
            and not Path("/usr/sbin", name).exists()]


def _program(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """SIGKILL when the pytest worker that started the daemon dies (prctl PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


class SlurmCluster:
    """start() brings munged, slurmctld and the slurmds up and waits until every node is idle (or
    raises SlurmError with the logs' tails); stop() cancels every job and stops the daemons."""

    def __init__(self, workdir: Path, nodes: tuple[TestNode, ...] = DEFAULT_NODES):
        self.dir = Path(workdir)
        self.nodes = nodes
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        self.conf = self.dir / "slurm.conf"
        self.munge_socket = self.dir / "run" / "munge.socket"
        self.device_files = True

    # -- files -------------------------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """What a client command needs to reach this cluster (SLURM_CONF; the config names the socket)."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def _devices(self, node: TestNode) -> list[Path]:
        paths = [self.dir / "dev" / f"{node.name}-gpu{i}" for i in range(node.gpus)]
        for path in paths:
            path.parent.mkdir(exist_ok=True)
            if not path.exists():
                os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a character device: /dev/null's numbers
        return paths

    def _write_config(self) -> None:
        d = self.dir
        for sub in ("state", "run", "log", "spool"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        self.ctld_port = free_port()
        self.ports = {node.name: free_port() for node in self.nodes}
        lines = [
            "ClusterName=cairntest",
            "SlurmctldHost=localhost",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={self.munge_socket}",
            f"SlurmctldPort={self.ctld_port}",
            f"StateSaveLocation={d / 'state'}",
            f"SlurmdSpoolDir={d / 'spool'}/%n",
            f"SlurmctldPidFile={d / 'run'}/slurmctld.pid",
            f"SlurmdPidFile={d / 'run'}/slurmd-%n.pid",
            f"SlurmctldLogFile={d / 'log'}/slurmctld.log",
            f"SlurmdLogFile={d / 'log'}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MailProg=/bin/true",
            "MpiDefault=none",
            # Cairn's scheduler decides; Slurm only runs what it is given, in submit order.
            "SchedulerType=sched/builtin",
            "PriorityType=priority/basic",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SlurmdParameters=config_overrides",  # the nodes are bigger than this machine
            "ReturnToService=2",
            "GresTypes=gpu",
            "MinJobAge=600",  # a finished job stays visible to squeue this long
            "KillWait=2",
            "SlurmctldTimeout=10",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "MessageTimeout=5",
        ]
        gres = []
        for node in self.nodes:
            gpus = f" Gres=gpu:{node.gpu_type}:{node.gpus}" if node.gpus else ""
            lines.append(f"NodeName={node.name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={self.ports[node.name]} "
                         f"CPUs={node.cpus} RealMemory={node.memory_mb}{gpus} State=UNKNOWN")
            (d / "spool" / node.name).mkdir(exist_ok=True)
            if not node.gpus:
                continue
            try:
                files = self._devices(node) if self.device_files else []
            except OSError:
                self.device_files, files = False, []
            if files:
                gres.append(f"NodeName={node.name} Name=gpu Type={node.gpu_type} File={','.join(map(str, files))}")
            else:
                gres.append(f"NodeName={node.name} Name=gpu Type={node.gpu_type} Count={node.gpus}")
        lines.append(f"PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:64")
        self.conf.write_text("\n".join(lines) + "\n")
        (d / "gres.conf").write_text("\n".join(gres) + "\n")
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)

    # -- processes ---------------------------------------------------------------------------

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = self.dir / "log" / f"{name}.out"
        self.logs[name] = log
        with open(log, "ab") as out:
            self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                cwd=self.dir, env=self.env, preexec_fn=_die_with_parent)

    def _check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise SlurmError(f"{name} exited with code {proc.returncode}\n{self.tails()}")

    def _wait(self, what: str, check, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                if check():
                    return
            except Exception as exc:  # noqa: BLE001 - not up yet
                last = exc
            time.sleep(0.2)
        raise SlurmError(f"{what} not ready after {timeout:.0f} s (last error: {last})\n{self.tails()}")

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        """A Slurm client command against this cluster."""
        done = subprocess.run([_program(argv[0]), *argv[1:]], env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        if check and done.returncode != 0:
            raise SlurmError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
        return done

    def node_states(self) -> dict[str, str]:
        data = json.loads(self.run("sinfo", "--json").stdout)
        return {node["name"]: node["state"] for node in data.get("nodes", [])}

    def start(self, *, timeout: float = 60.0) -> None:
        self._write_config()
        d = self.dir
        self._spawn("munged", [_program("munged"), "--foreground", "--force", f"--socket={self.munge_socket}",
                               f"--key-file={d / 'munge.key'}", f"--log-file={d / 'log' / 'munged.log'}",
                               f"--pid-file={d / 'run' / 'munged.pid'}", f"--seed-file={d / 'run' / 'munge.seed'}"])
        self._wait("munged", self.munge_socket.exists, timeout)
        # -i: ignore state a previous run left (there is none: the directory is new)
        self._spawn("slurmctld", [_program("slurmctld"), "-D", "-i", "-f", str(self.conf)])
        self._wait("slurmctld", lambda: self.run("scontrol", "ping", check=False).stdout.count("is UP") >= 1, timeout)
        for node in self.nodes:
            self._spawn(f"slurmd-{node.name}", [_program("slurmd"), "-D", "-N", node.name, "-f", str(self.conf)])
        self._wait("slurmd (every node idle)",
                   lambda: set(self.node_states().values()) == {"idle"} and len(self.node_states()) == len(self.nodes),
                   timeout)

    def cancel_all(self) -> None:
        self.run("scancel", f"--partition={PARTITION}", "--full", "--signal=KILL", check=False)
        self.run("scancel", f"--partition={PARTITION}", check=False)

    def stop(self) -> None:
        try:
            self.cancel_all()
        except Exception:  # noqa: BLE001 - the daemons go anyway
            pass
        for name in reversed(list(self.procs)):
            proc = self.procs[name]
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self._kill_steps()

    def _kill_steps(self) -> None:
        """slurmstepd daemons (and what they run) detach from slurmd: whatever is left with this
        cluster's SLURM_CONF in its environment is killed."""
        marker = f"SLURM_CONF={self.conf}".encode()
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if marker in f.read().split(b"\0"):
                        os.kill(int(pid), signal.SIGKILL)
            except OSError:
                continue

    def tails(self, lines: int = 20) -> str:
        parts = []
        for path in sorted((self.dir / "log").glob("*")):
            try:
                text = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                text = ["(unreadable)"]
            parts.append(f"--- {path.name} ---\n" + "\n".join(text))
        return "\n".join(parts)
