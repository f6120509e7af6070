"""Connect over HTTP/1.1 with JSON (the protocol's unary and server-streaming
forms), on http.client, with a small pool of keep-alive connections per node."""

from __future__ import annotations

import base64
import http.client
import json
import math
import struct
import threading
import urllib.parse
from typing import Any, Iterator

from .errors import LeaseholdError, from_answer

# What a failed attempt raises when no answer came: the request id makes a
# retry safe.
TRANSPORT_ERRORS = (OSError, http.client.HTTPException, TimeoutError)


def dur(seconds: float) -> str:
    """A google.protobuf.Duration in proto JSON."""
    return f"{seconds:.9f}".rstrip("0").rstrip(".") + "s"


def seconds(d: str | None) -> float:
    return float(d[:-1]) if d else 0.0


def b64(b: bytes | str) -> str:
    return base64.b64encode(b.encode() if isinstance(b, str) else b).decode()


def unb64(s: str | None) -> bytes:
    return base64.b64decode(s) if s else b""


class Node:
    """One node's URL and its pool of connections. Safe for concurrent use."""

    def __init__(self, url: str, token: str | None):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https"):
            raise LeaseholdError("invalid", f"client: endpoint {url!r} must start with http:// or https://")
        self.url = url.rstrip("/")
        self._https = u.scheme == "https"
        self._host = u.netloc
        self._token = token
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _conn(self, timeout: float | None) -> http.client.HTTPConnection:
        with self._lock:
            c = self._idle.pop() if self._idle else None
        if c is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            c = cls(self._host, timeout=timeout)
        elif c.sock is not None:
            c.sock.settimeout(timeout)
        c.timeout = timeout
        return c

    def _put(self, c: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < 64:
                self._idle.append(c)
                return
        c.close()

    def close_idle(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def _headers(self, content_type: str, timeout: float | None) -> dict[str, str]:
        h = {"Content-Type": content_type, "Connect-Protocol-Version": "1"}
        if timeout is not None:
            h["Connect-Timeout-Ms"] = str(max(1, math.floor(timeout * 1000)))
        if self._token:
            h["Authorization"] = f"Bearer {self._token}"
        return h

    def unary(self, path: str, msg: dict[str, Any], timeout: float | None) -> tuple[dict[str, Any], str | None]:
        """Sends msg to path and answers the reply and the leader the node names."""
        c = self._conn(timeout)
        try:
            c.request("POST", path, body=json.dumps(msg), headers=self._headers("application/json", timeout))
            r = c.getresponse()
            body = r.read()
        except BaseException:
            c.close()
            raise
        leader = r.getheader("Leasehold-Leader")
        if r.will_close:
            c.close()
        else:
            self._put(c)
        if r.status == 200:
            return (json.loads(body) if body else {}), leader
        raise _error(r.status, r.getheader("Content-Type"), body, r.getheader("Leasehold-Error-Code"), r.getheader("Retry-After"))

    def stream(self, path: str, msg: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Sends msg to a server-streaming path and yields each message until the stream ends."""
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        c = cls(self._host, timeout=None)
        try:
            body = json.dumps(msg).encode()
            c.request("POST", path, body=struct.pack(">BI", 0, len(body)) + body,
                      headers=self._headers("application/connect+json", None))
            r = c.getresponse()
            if r.status != 200:
                raise _error(r.status, r.getheader("Content-Type"), r.read(), r.getheader("Leasehold-Error-Code"), None)
            while True:
                head = r.read(5)
                if len(head) < 5:
                    raise LeaseholdError("unavailable", "stream ended without its end message")
                flags, n = struct.unpack(">BI", head)
                data = r.read(n)
                if len(data) < n:
                    raise LeaseholdError("unavailable", "stream cut short")
                m = json.loads(data) if data else {}
                if flags & 0x02:
                    if "error" in m:
                        e = m["error"]
                        own = (m.get("metadata") or {}).get("leasehold-error-code", [None])[0]
                        raise from_answer(e.get("code", "unknown"), own, e.get("message", ""), None)
                    return
                yield m
        finally:
            c.close()


def _error(status: int, ctype: str | None, body: bytes, own: str | None, retry_after: str | None) -> LeaseholdError:
    if ctype and ctype.startswith("application/json"):
        try:
            e = json.loads(body)
            return from_answer(e.get("code", "unknown"), own, e.get("message", ""), retry_after)
        except ValueError:
            pass
    # Not a node's answer (a proxy's, say): by HTTP status, as Connect maps it.
    code = {400: "invalid_argument", 401: "unauthenticated", 403: "permission_denied", 404: "unimplemented",
            429: "unavailable", 502: "unavailable", 503: "unavailable", 504: "unavailable"}.get(status, "unknown")
    return from_answer(code, None, f"HTTP {status}: {body[:200]!r}", retry_after)
