"""Start a deployment's serving command with a unix-socket bridge in front of it.

Usage: python -I -S bridge.py fd:N [HOST:]PORT -- COMMAND [ARG ...]

Runs inside a replica's bubblewrap sandbox, which has a network namespace of its own, so the
command's 127.0.0.1:$PORT is out of reach of every process on the host. The only way in is a unix
socket that Cairn itself binds and listens on (`listen`), in a folder of Cairn's that is not
mounted into the sandbox: the replica gets the listening descriptor N (inherited through the
shim, bubblewrap and setpriv) and nothing else, so it can neither replace the socket nor point
its path somewhere else (issue 44: a replica once swapped its socket for a link to a root-only
socket, and Cairn's gateway, running as root, relayed requests to it). This script forks a
bridge that accepts connections on N and copies bytes both ways to 127.0.0.1:PORT (no HTTP
parsing), then execs COMMAND in its own place (without N).

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
    """Where replica `replica`'s bridge listens: a folder of its own in the attempt's folder (both
    Cairn's, mode 0700, never mounted into the sandbox). `start` names one start of the replica: a
    replica started again (a new revision, a restart) listens on a name of its own, so nothing meant
    for it (the readiness probe first) reaches its predecessor's bridge."""
    return attempt_dir / f"sock-{replica}" / (f"serve-{start}.sock" if start else SOCKET_NAME)


def listen(path) -> socket.socket:
    """Cairn's listening socket at `path` (in a folder of Cairn's, mode 0700; sockets of earlier
    starts of the replica removed), to hand to the replica's bridge as a descriptor. Bound through
    /proc/self/fd/<folder>/<name>: a short address whatever the data folder's depth (an AF_UNIX
    address holds 107 bytes), and no chdir/umask, which are per process (threads)."""
    folder, name = os.path.split(os.fspath(path))
    os.makedirs(folder, mode=0o700, exist_ok=True)
    dir_fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(dir_fd)
        if info.st_uid != os.geteuid():  # a folder from before issue 44 (the run user's): made Cairn's again
            os.chown(f"/proc/self/fd/{dir_fd}", os.geteuid(), os.getegid())
        os.chmod(f"/proc/self/fd/{dir_fd}", 0o700)
        for entry in os.listdir(f"/proc/self/fd/{dir_fd}"):
            if entry.endswith(".sock"):
                try:
                    os.unlink(entry, dir_fd=dir_fd)
                except OSError:
                    pass
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(f"/proc/self/fd/{dir_fd}/{name}")
            os.chmod(name, 0o600, dir_fd=dir_fd)  # Cairn's alone (its folder already is)
            listener.listen(128)
        except OSError:
            listener.close()
            raise
    finally:
        os.close(dir_fd)
    return listener


def launcher_argv(python: str, fd: int, port: int, command: list) -> list:
    """The argv that runs `command` behind a bridge that accepts on the inherited descriptor `fd`.
    The source is passed inline: the sandbox has Cairn's Python but not its checkout."""
    with open(__file__) as f:
        source = f.read()
    return [python, "-I", "-S", "-c", source, f"fd:{int(fd)}", str(port), "--", *command]


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


async def _handle(port: int, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter,
                  host: str = "127.0.0.1") -> None:
    try:
        upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
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
    if len(argv) < 5 or argv[3] != "--" or not argv[1].startswith("fd:"):
        sys.stderr.write("usage: bridge.py fd:N PORT -- COMMAND [ARG ...]\n")
        return 2
    # PORT, or HOST:PORT: where the command listens (a notebook told to bind an address of the host,
    # inside a workload's network namespace that has it on its loopback: netns.py).
    host, _, port_text = argv[2].rpartition(":")
    port, command = int(port_text), argv[4:]
    host = host or "127.0.0.1"
    # Cairn bound and listens on the socket before the sandbox started: a request never finds it
    # missing once the replica runs (it waits in the backlog until the bridge accepts).
    try:
        listener = socket.socket(fileno=int(argv[1][3:]))
    except (ValueError, OSError) as exc:
        sys.stderr.write(f"cairn bridge: no listening socket ({argv[1]}): {exc}\n")
        return 2
    listener.set_inheritable(False)  # never passed on to the command
    pid = os.fork()
    if pid == 0:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        _die_with_parent()
        try:
            asyncio.run(_serve_socket(listener, port, host))
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


async def _serve_socket(listener: socket.socket, port: int, host: str = "127.0.0.1") -> None:
    # A TCP listener: Cairn's port on the host for a replica in a network namespace of its own (netns.py).
    start = asyncio.start_unix_server if listener.family == socket.AF_UNIX else asyncio.start_server
    server = await start(lambda r, w: _handle(port, r, w, host), sock=listener)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
