"""A WSGI middleware for the IETF draft "The Idempotency-Key HTTP Header
Field", like the Go idempotency/httpidem: the first request with a key runs
the app and stores its status, selected headers and body; a retry gets the
stored response (Idempotency-Replayed: true); a concurrent one 409; the key
reused for another request 422; a missing key where one is required 400; a
5xx is not stored (the attempt is abandoned, so a retry runs again). Errors
are application/problem+json. The stored form and the fingerprint are
httpidem's, so Go, TypeScript and Python services can share keys."""

from __future__ import annotations

import base64
import io
import json
import re
from typing import Any, Callable, Iterable

from .errors import FingerprintMismatchError, InProgressError, LeaseholdError
from .idempotency import Idempotency, fingerprint_of

REPLAYED_HEADER = "Idempotency-Replayed"
MAX_KEY_LEN = 200
_PRINTABLE = re.compile(r"^[\x20-\x7e]+$")


class IdempotencyMiddleware:
    """Wraps a WSGI app. The app finds the key and the attempt's fencing token
    in environ["leasehold.idempotency"] ({"key", "token", "lost"})."""

    def __init__(self, app: Callable[..., Iterable[bytes]], idempotency: Idempotency, prefix: str = "",
                 required: bool = False, attempt_ttl: float = 10.0, max_body: int = 1 << 20,
                 headers: tuple[str, ...] = ("Content-Type", "Location", "Cache-Control"),
                 retryable: Callable[[int], bool] = lambda status: status >= 500):
        self.app, self.idem, self.prefix, self.required = app, idempotency, prefix, required
        self.attempt_ttl, self.max_body, self.headers, self.retryable = attempt_ttl, max_body, headers, retryable

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        raw = environ.get("HTTP_IDEMPOTENCY_KEY")
        if raw is None:
            if self.required:
                return _problem(start_response, 400, "Idempotency-Key is missing", "This endpoint requires an Idempotency-Key header.")
            return self.app(environ, start_response)
        key = _parse_key(raw)
        if isinstance(key, ValueError):
            return _problem(start_response, 400, "Idempotency-Key is malformed", str(key))
        n = int(environ.get("CONTENT_LENGTH") or 0)
        if n > self.max_body:
            return _problem(start_response, 413, "The request body is too large", f"The body may be up to {self.max_body} bytes.")
        body = environ["wsgi.input"].read(n) if n else b""
        environ["wsgi.input"] = io.BytesIO(body)
        fp = fingerprint_of(environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", "") or "/", body)
        try:
            b = self.idem.begin(self.prefix + key, fp, attempt_ttl=self.attempt_ttl, progress_timeout=0)
        except FingerprintMismatchError:
            return _problem(start_response, 422, "Idempotency-Key reused with a different request",
                            "This key was first used with another method, path or body.")
        except InProgressError:
            return _problem(start_response, 409, "A request with this Idempotency-Key is in progress",
                            "Retry later with the same key to get its result.")
        except LeaseholdError as e:
            if e.code == "invalid":
                return _problem(start_response, 400, "Idempotency-Key is not acceptable", e.message)
            return _problem(start_response, 503, "The idempotency store is unavailable", e.message)
        if b.attempt is None:
            return _replay(start_response, b.result or b"")
        a = b.attempt
        environ["leasehold.idempotency"] = {"key": key, "token": a.token, "lost": a.lost}
        got: dict[str, Any] = {}

        def capture(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Callable[[bytes], None]:
            got["status"], got["headers"] = status, headers
            return lambda chunk: got.setdefault("early", []).append(chunk)

        try:
            it = self.app(environ, capture)
            chunks = list(got.get("early", [])) + list(it)
            if hasattr(it, "close"):
                it.close()
        except BaseException:
            a.abandon()
            raise
        status = int(got["status"].split()[0])
        lost = lambda: _problem(start_response, 409, "The request outlived its idempotency attempt",
                                "Another request with the same Idempotency-Key took over; retry with the same key to get the result.")
        if a.lost.is_set():
            return lost()
        if self.retryable(status):
            try:
                a.abandon()
            except LeaseholdError:
                pass
        else:
            keep = {h.lower() for h in self.headers}
            stored: dict[str, Any] = {"s": status, "h": {}, "b": base64.b64encode(b"".join(chunks)).decode()}
            for k, v in got["headers"]:
                if k.lower() in keep:
                    stored["h"].setdefault("-".join(w.capitalize() for w in k.split("-")), []).append(v)
            try:
                a.complete(json.dumps(stored))
            except LeaseholdError as e:
                if e.code == "stale_token":
                    return lost()
        start_response(got["status"], got["headers"])
        return chunks


def _replay(start_response: Callable[..., Any], result: bytes) -> list[bytes]:
    try:
        s = json.loads(result)
        status = int(s["s"])
    except (ValueError, KeyError, TypeError):
        return _problem(start_response, 500, "The stored response cannot be replayed",
                        "The result stored for this key is not a response this server wrote.")
    headers = [(k, v) for k, vs in (s.get("h") or {}).items() for v in vs] + [(REPLAYED_HEADER, "true")]
    start_response(f"{status} {_reason(status)}", headers)
    return [base64.b64decode(s.get("b") or "")]


def _parse_key(v: str) -> str | ValueError:
    """Accepts the draft's sf-string ("...") and, leniently, a bare token."""
    v = v.strip()
    if "," in v:
        return ValueError("send exactly one Idempotency-Key header")
    if v.startswith('"'):
        inner = v[1:-1]
        if len(v) < 2 or not v.endswith('"') or '"' in inner or "\\" in inner:
            return ValueError('the Idempotency-Key value must be a quoted string like "8e03978e-40d5-43e8-bc93-6894a57f9324"')
        v = inner
    if not v or len(v) > MAX_KEY_LEN:
        return ValueError(f"the Idempotency-Key must be 1 to {MAX_KEY_LEN} characters")
    if not _PRINTABLE.match(v):
        return ValueError("the Idempotency-Key must be printable ASCII")
    return v


def _reason(status: int) -> str:
    from http import HTTPStatus
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _problem(start_response: Callable[..., Any], status: int, title: str, detail: str) -> list[bytes]:
    body = json.dumps({"type": "about:blank", "title": title, "status": status, "detail": detail}).encode()
    start_response(f"{status} {_reason(status)}", [("Content-Type", "application/problem+json"), ("Content-Length", str(len(body)))])
    return [body]
