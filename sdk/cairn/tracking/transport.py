"""The sender's HTTP client: `post()` like requests.Session's, on one keep-alive http.client
connection per host for plain-HTTP URLs (what jobs use inside a cluster).

A training script logging several times a second posts as often; requests costs several times
what http.client does per request, and that CPU is taken from the training loop. HTTPS URLs,
and any URL when proxy variables are set, go through requests (its certificates and proxies).
A request that fails on a reused connection (the server closed it while idle) is sent once more
on a new one: every tracking request is idempotent (batch ids, client ids).
"""
from __future__ import annotations

import http.client
import json
import socket
import urllib.request
from typing import Any
from urllib.parse import urlsplit

_STALE = (http.client.RemoteDisconnected, http.client.CannotSendRequest, http.client.BadStatusLine,
          BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class Response:
    def __init__(self, status: int, content: bytes):
        self.status_code = status
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        return json.loads(self.content)


class Session:
    def __init__(self) -> None:
        self._connections: dict[str, http.client.HTTPConnection] = {}
        self._fallback = None
        self._proxies = bool(urllib.request.getproxies())

    def _requests(self):
        if self._fallback is None:
            import requests

            self._fallback = requests.Session()
        return self._fallback

    def post(self, url: str, json: Any = None, headers: dict[str, str] | None = None,
             timeout: float | tuple[float, float] = (3.0, 30.0)):
        parts = urlsplit(url)
        if parts.scheme != "http" or self._proxies:
            return self._requests().post(url, json=json, headers=headers, timeout=timeout)
        connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        body = _dumps(json)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        all_headers = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
        for attempt in (1, 2):
            conn = self._connections.get(parts.netloc)
            reused = conn is not None
            if conn is None:
                conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=connect)
                conn.connect()
                conn.sock.settimeout(read)
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._connections[parts.netloc] = conn
            try:
                conn.request("POST", path, body=body, headers=all_headers)
                response = conn.getresponse()
                content = response.read()
            except _STALE:
                self._drop(parts.netloc)
                if reused and attempt == 1:
                    continue
                raise
            except BaseException:
                self._drop(parts.netloc)
                raise
            if response.will_close:
                self._drop(parts.netloc)
            return Response(response.status, content)
        raise AssertionError("unreachable")

    def _drop(self, netloc: str) -> None:
        conn = self._connections.pop(netloc, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for netloc in list(self._connections):
            self._drop(netloc)
        if self._fallback is not None:
            self._fallback.close()


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
