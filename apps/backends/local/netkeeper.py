"""Keep one workload attempt's network namespace connected: its NAT to the outside and its relay
to Cairn's API. Started (detached) by netns.py, one per namespace; stdlib only, like shim.py.

Usage: python -I -S netkeeper.py --netns PATH --notify-fd FD [--slirp PATH] [--user UID:GID]
                                 [--relay LISTEN_IP:PORT=UPSTREAM_IP:PORT ...]

- Detaches first (fork; the first process exits at once, so the launcher reaps it) and leads a
  session of its own, so it outlives a crash of the Cairn process that started it, like a replica.
- With --slirp, starts slirp4netns on the namespace (user-mode NAT: the namespace's tap0 reaches
  the outside through this host's own sockets; no veth, no host firewall rule, no ip_forward).
  slirp4netns gets the read end of a pipe as its --exit-fd: it ends when this process ends,
  however it ends (SIGKILL included), so killing the keeper is all the teardown it needs.
- With --relay, binds LISTEN_IP:PORT *inside* the namespace and relays each connection to
  UPSTREAM_IP:PORT on the host: Cairn's API (CAIRN_API_URL), the one host service a replica may
  talk to (the `cairn` SDK logs metrics and checkpoints there). Nothing else on the host is reachable.
- Then, with --user, drops to that user (no groups): the relay needs no privilege once bound.
- Writes "ok PID" (or "error: WHY") to FD once the namespace is ready.
"""
import asyncio
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys

CLONE_NEWNET = 0x40000000
CHUNK = 64 * 1024
_SLIRP_READY_TIMEOUT = 20.0


def setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def bind_inside(netns: str, address: tuple[str, int]) -> socket.socket:
    """A listening TCP socket that belongs to the namespace at `netns` (a socket keeps the
    namespace it was made in), made by stepping in and back out again."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    target = os.open(netns, os.O_RDONLY | os.O_CLOEXEC)
    try:
        setns(target)
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(128)
        finally:
            setns(home)
    finally:
        os.close(home)
        os.close(target)
    return sock


def start_slirp(slirp: str, netns: str) -> int:
    """slirp4netns on the namespace; returns the write end of its exit pipe (keep it open)."""
    exit_read, exit_write = os.pipe()
    ready_read, ready_write = os.pipe()
    os.set_inheritable(exit_read, True)
    os.set_inheritable(ready_write, True)
    # slirp4netns' own sandbox (a mount namespace, pivot_root) unmounts everything under its old
    # root; /run/netns is a shared mount, so without a private copy of the mounts first that
    # unmount propagates to the host and takes every /run/netns/<name> with it.
    unshare = shutil.which("unshare") or "/usr/bin/unshare"
    argv = [unshare, "--mount", "--propagation", "private", slirp, "--configure", "--mtu=65520",
            "--disable-host-loopback", "--enable-sandbox", "--enable-seccomp",
            f"--exit-fd={exit_read}", f"--ready-fd={ready_write}", "--netns-type=path", netns, "tap0"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            pass_fds=(exit_read, ready_write), close_fds=True)
    os.close(exit_read)
    os.close(ready_write)
    import select

    ready, _, _ = select.select([ready_read], [], [], _SLIRP_READY_TIMEOUT)
    answer = os.read(ready_read, 1) if ready else b""
    os.close(ready_read)
    if answer != b"1":
        proc.kill()
        err = proc.stderr.read().decode(errors="replace").strip() if proc.poll() is not None else ""
        raise OSError(f"slirp4netns did not come up: {err or 'no answer'}")
    proc.stderr.close()
    return exit_write


async def _pipe(reader, writer) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


async def _relay(upstream: tuple[str, int], client_reader, client_writer) -> None:
    try:
        reader, writer = await asyncio.open_connection(*upstream)
    except OSError:
        client_writer.close()
        return
    try:
        await asyncio.gather(_pipe(client_reader, writer), _pipe(reader, client_writer))
    finally:
        for w in (client_writer, writer):
            w.close()


async def serve(relays: list[tuple[socket.socket, tuple[str, int]]]) -> None:
    servers = [await asyncio.start_server(lambda r, w, up=up: _relay(up, r, w), sock=sock) for sock, up in relays]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    async def orphaned():  # its attempt's folder was deleted (the workload with it): nothing to keep
        while os.fstat(2).st_nlink > 0:
            await asyncio.sleep(5)
        stop.set()

    watch = asyncio.create_task(orphaned())
    await stop.wait()
    watch.cancel()
    for server in servers:
        server.close()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def main(argv: list[str]) -> int:
    options: dict = {"relay": [], "slirp": None, "user": None, "netns": None, "notify_fd": None}
    rest = argv[1:]
    while rest:
        flag = rest.pop(0)
        if flag == "--relay" and rest:
            listen, _, upstream = rest.pop(0).partition("=")
            options["relay"].append((_address(listen), _address(upstream)))
        elif flag in ("--netns", "--slirp", "--user", "--notify-fd") and rest:
            options[flag[2:].replace("-", "_")] = rest.pop(0)
        else:
            sys.stderr.write(f"netkeeper: unknown argument {flag!r}\n")
            return 2
    if not options["netns"] or options["notify_fd"] is None:
        sys.stderr.write("usage: netkeeper.py --netns PATH --notify-fd FD [...]\n")
        return 2
    notify = int(options["notify_fd"])
    if os.fork():
        os._exit(0)
    os.setsid()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        exit_fd = start_slirp(options["slirp"], options["netns"]) if options["slirp"] else None
        relays = [(bind_inside(options["netns"], listen), upstream) for listen, upstream in options["relay"]]
        if options["user"]:
            uid, gid = (int(x) for x in options["user"].split(":"))
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
    except (OSError, ValueError) as exc:
        os.write(notify, f"error: {exc}".encode())
        return 1
    os.write(notify, f"ok {os.getpid()}".encode())
    os.close(notify)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    try:
        asyncio.run(serve(relays))
    finally:
        if exit_fd is not None:
            os.close(exit_fd)  # slirp4netns ends with it
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
