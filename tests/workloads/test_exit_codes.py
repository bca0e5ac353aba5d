"""A replica's exit code says what the shell meant by it (issue 46, item 15): 127 is a command
that was not found, not just a number."""
from apps.workloads.observations import EXITED, ReplicaState


def test_exit_127_says_command_not_found():
    text = ReplicaState(replica=0, phase=EXITED, exit_code=127).describe()
    assert text.startswith("Replica 0 exited with code 127 (command not found")
    assert "not executable" in ReplicaState(replica=1, phase=EXITED, exit_code=126).describe()
    assert ReplicaState(replica=0, phase=EXITED, exit_code=3).describe() == "Replica 0 exited with code 3."
