"""The sandbox's command line: deployments get a network namespace of their own, others do not;
the bridge launcher keeps the user's command last, to be exec'd in its place."""
import sys
from pathlib import Path

from apps.backends.local import bridge, sandbox


def test_only_a_sandbox_without_network_unshares_it():
    common = {"bwrap": "bwrap", "command": ["serve"], "cwd": "/tmp", "writable": ["/tmp"]}
    assert "--unshare-net" not in sandbox.bwrap_argv(**common)
    argv = sandbox.bwrap_argv(**common, network=False)
    assert "--unshare-net" in argv and argv.index("--unshare-net") < argv.index("--")


def test_launcher_runs_the_bridge_source_then_the_command(tmp_path):
    argv = bridge.launcher_argv(sys.executable, 7, 8123, ["python", "app.py", "--port", "$PORT"])
    assert argv[:4] == [sys.executable, "-I", "-S", "-c"]
    assert argv[4] == Path(bridge.__file__).read_text()  # the sandbox has Python, not Cairn's checkout
    # The bridge gets Cairn's listening socket as a descriptor, never a path it could redirect.
    assert argv[5:] == ["fd:7", "8123", "--", "python", "app.py", "--port", "$PORT"]
    assert bridge.socket_path(tmp_path, 3) == tmp_path / "sock-3" / "serve.sock"
