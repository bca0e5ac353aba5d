"""Where URLs that Cairn fetches for a user may point (issue 44, SSRF).

A URL a user gives (an S3 dataset's endpoint_url) is fetched by Cairn's server, from inside the
cluster's network: pointed at 127.0.0.1, 169.254.169.254 or a private address it reached
Cairn's own API, PostgreSQL's port, or a cloud metadata service, and the error showed the answer.
Now such a destination is refused unless an admin allows that host: on the pool
(ResourcePool.fetch_allowed_hosts) or for every pool (CAIRN_FETCH_ALLOWED_HOSTS).

Refused: any address that is not global unicast - loopback, link-local (169.254/16, fe80::/10,
so the metadata address 169.254.169.254), private (RFC 1918, ULA fc00::/7 with fd00:ec2::254),
CGNAT 100.64/10, unspecified, multicast, reserved and documentation ranges; an IPv4-mapped IPv6
address is judged as its IPv4 address.

DNS rebinding: a name checked at registration could resolve elsewhere when the client connects.
So the client (obstore, whose Rust HTTP stack cannot be handed a resolver) is pointed at
FetchGuard, a forward proxy on 127.0.0.1 living for one fetch: for every connection the client
opens (redirects included) it resolves the destination once, checks every address, and connects
to the address it checked. TLS passes through it untouched (CONNECT), so certificates are still
verified against the name."""
from __future__ import annotations

import ipaddress
import logging
import select
import socket
import threading
from collections.abc import Iterable
from urllib.parse import urlsplit

logger = logging.getLogger(__name__)

CGNAT = ipaddress.ip_network("100.64.0.0/10")
METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
HEAD_LIMIT = 64 * 1024
CONNECT_TIMEOUT = 5.0


class UnsafeDestination(Exception):
    """A destination Cairn may not fetch; the message is meant for the user."""


def refused_reason(address: str | ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why Cairn may not connect to this address for a user (None: it may)."""
    ip = ipaddress.ip_address(address) if isinstance(address, str) else address
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in METADATA:
        return "a cloud metadata address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_private or ip in CGNAT or not ip.is_global:
        return "a private address"
    return None


def parse_allowed_entry(entry) -> tuple[str, int | None]:
    """'host', 'host:port', '10.0.0.5', '10.0.0.5:9000', '::1', '[::1]:9000' -> (host, port);
    ValueError with a message for anything else."""
    if not isinstance(entry, str) or not entry.strip() or len(entry) > 260 or any(c.isspace() for c in entry):
        raise ValueError(f"{entry!r}: give a host name, an IP address, or host:port.")
    entry = entry.strip()
    try:
        return str(ipaddress.ip_address(entry)).lower(), None  # a bare IPv6 address has colons
    except ValueError:
        pass
    try:
        parts = urlsplit(f"//{entry}")
        host, port = parts.hostname, parts.port
    except ValueError:
        raise ValueError(f"{entry!r}: the port must be a number from 1 to 65535.") from None
    if not host or parts.path or parts.query or parts.fragment or parts.username or parts.password \
            or (port is not None and not 1 <= port <= 65535) or entry.endswith(":"):
        raise ValueError(f"{entry!r}: give a host name, an IP address, or host:port.")
    try:
        host = str(ipaddress.ip_address(host))
    except ValueError:
        if not all(label and len(label) <= 63 and label.replace("-", "").isalnum() for label in host.split(".")):
            raise ValueError(f"{entry!r}: {host!r} is not a host name.") from None
    return host.lower(), port


def clean_allowed_hosts(value) -> list[str]:
    """An admin's list as stored (ValueError when an entry is not host, IP or host:port)."""
    if not isinstance(value, list):
        raise ValueError("Give a list of hosts, e.g. [\"s3.internal\", \"10.0.0.5:9000\"].")
    for entry in value:
        parse_allowed_entry(entry)
    return [entry.strip() for entry in value]


def _is_allowed(host: str, port: int, address: str, allowed: Iterable[tuple[str, int | None]]) -> bool:
    host = host.lower().rstrip(".")
    for name, allowed_port in allowed:
        if allowed_port is not None and allowed_port != port:
            continue
        if name == host or name == address.lower():
            return True
    return False


class Policy:
    """The hosts an admin allows for one fetch (the pool's list and the server-wide one)."""

    def __init__(self, allowed_hosts: Iterable[str] = ()):
        self.allowed_hosts = list(allowed_hosts)  # as the admin wrote them (cachefill gets these)
        self.allowed = []
        for entry in self.allowed_hosts:
            try:
                self.allowed.append(parse_allowed_entry(entry))
            except ValueError:
                logger.warning("netguard: ignoring the allowed host %r (not host, IP or host:port)", entry)

    def resolve(self, host: str, port: int) -> list[str]:
        """The addresses `host` resolves to, all of which Cairn may connect to; UnsafeDestination
        when one is refused (or none is found). Resolved once: connect to what this returns."""
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            raise UnsafeDestination(f"The host '{host}' could not be resolved.") from None
        addresses = list(dict.fromkeys(info[4][0] for info in infos))
        if not addresses:
            raise UnsafeDestination(f"The host '{host}' could not be resolved.")
        for address in addresses:
            reason = refused_reason(address.split("%", 1)[0])
            if reason and not _is_allowed(host, port, address, self.allowed):
                raise UnsafeDestination(
                    f"The host '{host}' resolves to {reason}, which Cairn does not fetch from for users; an admin "
                    f"can allow this host on the pool (fetch_allowed_hosts).")
        return addresses

    def check_url(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UnsafeDestination("Give an http(s) URL with a host.")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise UnsafeDestination("The URL's port must be a number from 1 to 65535.") from None
        self.resolve(parts.hostname, port)


def _split_host_port(target: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(f"//{target}")
    if not parts.hostname:
        raise ValueError(target)
    return parts.hostname, parts.port or default_port


class FetchGuard:
    """A forward proxy for one fetch (use as a context manager; give `proxy_url` to the client).
    Each connection's destination is resolved, checked with the policy, and connected to by the
    checked address. `refusal` holds the first refusal's message, for the caller's error."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self.refusal: str | None = None
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._closing = threading.Event()

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> FetchGuard:
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(0.2)
        thread = threading.Thread(target=self._accept, name="netguard-accept", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(self, *exc) -> None:
        self._closing.set()
        for thread in list(self._threads):
            thread.join(timeout=2)
        self._listener.close()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), name="netguard-conn", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _refuse(self, conn: socket.socket, message: str, status: str = "403 Forbidden") -> None:
        self.refusal = self.refusal or message
        try:
            conn.sendall(f"HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
        except OSError:
            pass

    def _serve(self, conn: socket.socket) -> None:
        upstream = None
        try:
            conn.settimeout(30)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk or len(head) > HEAD_LIMIT:
                    return
                head += chunk
            head, _, rest = head.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = (lines[0].split(" ") + ["", "", ""])[:3]
            if method == "CONNECT":
                host, port = _split_host_port(target, 443)
            else:
                parts = urlsplit(target)
                if parts.scheme != "http" or not parts.hostname:
                    return self._refuse(conn, "The fetch used a URL the guard does not forward.", "400 Bad Request")
                host, port = parts.hostname, parts.port or 80
            try:
                addresses = self.policy.resolve(host, port)
            except UnsafeDestination as exc:
                return self._refuse(conn, str(exc))
            upstream = self._connect(addresses, port)
            if upstream is None:
                return self._refuse(conn, f"Could not connect to '{host}'.", "502 Bad Gateway")
            if method == "CONNECT":
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                if rest:
                    upstream.sendall(rest)
            else:
                # Origin form, and one request per connection: a later request on a kept-alive
                # connection could name another host, which this connection was not checked for.
                path = parts.path or "/"
                if parts.query:
                    path += "?" + parts.query
                headers = [line for line in lines[1:] if line.split(":", 1)[0].strip().lower()
                           not in ("connection", "proxy-connection", "proxy-authorization", "keep-alive")]
                request = "\r\n".join([f"{method} {path} {version}", *headers, "Connection: close", "", ""])
                upstream.sendall(request.encode("latin-1") + rest)
            self._pump(conn, upstream)
        except (OSError, ValueError, UnicodeError):
            pass
        finally:
            for sock in (conn, upstream):
                if sock is not None:
                    sock.close()

    @staticmethod
    def _connect(addresses: list[str], port: int) -> socket.socket | None:
        for address in addresses:
            try:
                return socket.create_connection((address, port), timeout=CONNECT_TIMEOUT)
            except OSError:
                continue
        return None

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        a.settimeout(None)
        b.settimeout(None)
        peers = {a: b, b: a}
        while not self._closing.is_set():
            ready, _, _ = select.select(list(peers), [], [], 0.2)
            for sock in ready:
                data = sock.recv(65536)
                if not data:
                    return
                peers[sock].sendall(data)
