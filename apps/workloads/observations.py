"""What a backend observes of one replica: the vocabulary shared by the backends (which report it)
and apps.workloads.lifecycle (which decides what it means). Plain Python, importable before the
app registry is ready."""
from __future__ import annotations

from dataclasses import dataclass

RUNNING = "running"
EXITED = "exited"
LOST = "lost"  # gone, and nobody recorded how it ended


@dataclass(frozen=True)
class ReplicaState:
    replica: int
    phase: str  # RUNNING | EXITED | LOST
    exit_code: int | None = None  # 128 + N when killed by signal N
    signal: int | None = None
    finished_at: float | None = None  # epoch seconds, when known
    pid: int | None = None
    # Why the backend stopped it itself, when it did (OutOfMemory: the local backend's limits).
    reason: str = ""
    detail: str = ""

    @property
    def alive(self) -> bool:
        return self.phase == RUNNING

    @property
    def failed(self) -> bool:
        return self.phase == LOST or (self.phase == EXITED and self.exit_code != 0)

    def describe(self) -> str:
        """'Replica 1 exited with code 3.' and the like, for events and status messages."""
        if self.phase == RUNNING:
            return f"Replica {self.replica} is running."
        if self.phase == LOST:
            return f"Replica {self.replica} disappeared without an exit code (its supervisor was killed)."
        if self.reason:
            return f"Replica {self.replica} was stopped ({self.reason}): {self.detail}"
        if self.signal:
            return f"Replica {self.replica} was killed by signal {self.signal} (exit code {self.exit_code})."
        return f"Replica {self.replica} exited with code {self.exit_code}{_EXIT_MEANINGS.get(self.exit_code, '')}."


# What the shell's own exit codes mean (the command is run through a shell): said with the code.
_EXIT_MEANINGS = {
    126: " (command found but not executable: check its permissions)",
    127: " (command not found: check the command's name and that it is installed in the image or on the PATH)",
}
