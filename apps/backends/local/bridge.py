"""Start a deployment's serving command with a unix-socket bridge in front of it.

Usage: python -I -S bridge.py SOCKET PORT -- COMMAND [ARG ...]

Runs inside a replica's bubblewrap sandbox, which has a network namespace of its own (a private
loopback and nothing else), so the command's 127.0.0.1:$PORT is out of reach of every process
on the host. The only way in is SOCKET, in a folder bind-mounted into the sandbox: this script
forks a bridge that accepts connections there and copies bytes both ways to 127.0.0.1:PORT
(no HTTP parsing), then execs COMMAND in its own place.

So the command keeps this process's pid: it is the child of the sandbox's init, the process the
shim forwards SIGTERM to (shim.signal_targets), and the bridge is the command's child, never a
signal target. The bridge ends with the sandbox: when the command exits, bubblewrap's init exits
and the kernel kills what is left in the PID namespace. It also ends when its parent (the
command) goes away, through PR_SET_PDEATHSIG where the platform has it.

Standard library only (started with -I -S, like shim.py).
"""
import asyncio
import os
import signal
import socket
import sys

CHUNK = 64 * 1024
SOCKET_NAME = "serve.sock"


# -- used by the local backend (this file is also its own launcher's source) ---------------------

def socket_path(attempt_dir, replica: int, start: str = ""):
    """Where replica `replica`'s bridge listens: a folder of its own in the attempt's folder
    (Cairn's, mode 0700), which is the only part of it mounted into the sandbox. `start` names one
    start of the replica: a replica started again (a new revision, a restart) listens on a name of
    its own, so nothing meant for it (the readiness probe first) reaches its predecessor's bridge,
    which keeps the old name until it ends."""
    return attempt_dir / f"sock-{replica}" / (f"serve-{start}.sock" if start else SOCKET_NAME)


def prepare_socket_dir(folder, *, uid, gid) -> None:
    """The socket's folder belongs to the replica's user (it creates the socket) and to no one else."""
    folder.mkdir(parents=True, exist_ok=True)
    if uid is not None:
        os.chown(folder, uid, gid)
    os.chmod(folder, 0o700)


def launcher_argv(python: str, path, port: int, command: list) -> list:
    """The argv that runs `command` behind a bridge on `path`. The source is passed inline: the
    sandbox has Cairn's Python but not its checkout."""
    with open(__file__) as f:
        source = f.read()
    return [python, "-I", "-S", "-c", source, str(path), str(port), "--", *command]



async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # half-close: the other side may still answer
    except (ConnectionError, OSError):
        writer.close()


async def _handle(port: int, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
    try:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        client_writer.close()  # not listening (yet): the gateway sees the connection close unanswered
        return
    sock = upstream_writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small writes go at once
    try:
        await asyncio.gather(_pipe(client_reader, upstream_writer), _pipe(upstream_reader, client_writer))
    finally:
        for writer in (client_writer, upstream_writer):
            writer.close()


def _die_with_parent() -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[3] != "--":
        sys.stderr.write("usage: bridge.py SOCKET PORT -- COMMAND [ARG ...]\n")
        return 2
    path, port, command = argv[1], int(argv[2]), argv[4:]
    # The socket must exist before the command starts, so a request never finds it missing once
    # the replica runs: bind here, in the parent, then hand the listening socket to the bridge.
    # Bound by its name from inside its folder: a socket's full path may be longer than the
    # 107 bytes an AF_UNIX address holds (deep data folders).
    folder, name = os.path.split(path)
    cwd = os.getcwd()
    os.chdir(folder or ".")
    for entry in os.listdir("."):  # left by earlier starts of this replica (a bridge still running
        if entry == name or entry.endswith(".sock"):  # keeps the connections it has)
            try:
                os.unlink(entry)
            except OSError:
                pass
    old = os.umask(0o177)  # the socket is its owner's alone (Cairn reaches it as root or as the same user)
    try:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(name)
    finally:
        os.umask(old)
        os.chdir(cwd)
    listener.listen(128)
    pid = os.fork()
    if pid == 0:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        _die_with_parent()
        try:
            asyncio.run(_serve_socket(listener, port))
        except BaseException as exc:  # noqa: BLE001
            sys.stderr.write(f"cairn bridge: {exc!r}\n")
        os._exit(1)
    listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"cairn: cannot start {command[0]!r}: {exc}\n")
        sys.stderr.flush()
        os.kill(pid, signal.SIGKILL)
        return 127


async def _serve_socket(listener: socket.socket, port: int) -> None:
    server = await asyncio.start_unix_server(lambda r, w: _handle(port, r, w), sock=listener)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
