"""Idempotency keys: begin, complete, abandon, and idempotent(), which runs a
function once per key (as the Go client.Idempotent does)."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any, Callable

from .core import Core, as_int, request_id
from .errors import FingerprintMismatchError, InProgressError, LeaseholdError
from .lease import Lease
from .wire import b64, dur, seconds, unb64


def fingerprint_of(*parts: bytes | str) -> bytes:
    """A fingerprint of parts (a method, a path, a body), the same as the Go client's FingerprintOf."""
    h = hashlib.sha256()
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(f"{len(b)}:".encode())
        h.update(b)
    return h.digest()


class Attempt:
    """An attempt this caller owns on a key. Its lease renews in the background."""

    def __init__(self, core: Core, key: str, lease: Lease):
        self._c = core
        self.key = key
        self.lease = lease

    @property
    def token(self) -> int:
        """The attempt's fencing token: write it with the effect."""
        return self.lease.token

    @property
    def lost(self):
        return self.lease.lost

    def complete(self, result: bytes | str) -> None:
        """Stores result as the key's answer; a stale attempt is refused with code "stale_token"."""
        req = {"key": self.key, "attempt": str(self.lease.id), "secret": self.lease.secret, "result": b64(result)}
        self.lease._release_with(lambda: self._c.call("/leasehold.v1.Idempotency/Complete", req))

    def abandon(self) -> None:
        """Frees the key for a retry at once."""
        req = {"key": self.key, "attempt": str(self.lease.id), "secret": self.lease.secret, "requestId": request_id()}
        self.lease._release_with(lambda: self._c.call("/leasehold.v1.Idempotency/Abandon", req))


@dataclass
class Begun:
    """What begin answers: an attempt to run, or the stored result of a completed one."""

    attempt: Attempt | None = None
    result: bytes | None = None


class Idempotency:
    def __init__(self, core: Core):
        self._c = core

    def begin(self, key: str, fingerprint: bytes, attempt_ttl: float = 15.0, retention: float = 0, wait: float = 0,
              owner: str = "", progress_timeout: float | None = None) -> Begun:
        """Starts an attempt on key, or answers the stored result of a completed
        one. Raises InProgressError if another attempt owns it, and
        FingerprintMismatchError if the key was first used for another request.
        The attempt renews while its holder reports progress (attempt.lease.progress())."""
        # The secret is made here, so a retried Begin (after a lost reply) is the same attempt.
        secret = request_id()
        req: dict[str, Any] = {"key": key, "fingerprint": b64(fingerprint), "attemptTtl": dur(attempt_ttl), "owner": owner, "secret": secret}
        if retention:
            req["retention"] = dur(retention)
        if wait:
            req["wait"] = dur(wait)
        sent = time.monotonic()
        try:
            r = self._c.call("/leasehold.v1.Idempotency/Begin", req, per_try=wait + self._c.config.request_timeout,
                             deadline=sent + wait + self._c.config.call_timeout)
        except LeaseholdError as e:
            if e.code == "not_holder":
                raise FingerprintMismatchError(e.message) from e
            raise
        state = r.get("state")
        if state == "IDEM_STATE_STARTED":
            lease = Lease(self._c, as_int(r.get("attempt")), secret, [key], as_int(r.get("token")), sent,
                          seconds(r.get("expiresIn")) or attempt_ttl, attempt_ttl, False,
                          attempt_ttl if progress_timeout is None else progress_timeout, True)
            if not self._c.track(lease):
                raise LeaseholdError("canceled", "client: closed")
            lease._start()
            return Begun(attempt=Attempt(self._c, key, lease))
        if state == "IDEM_STATE_COMPLETED":
            return Begun(result=unb64(r.get("result")))
        raise InProgressError(key, as_int(r.get("ownerToken")))

    def idempotent(self, key: str, fingerprint: bytes, fn: Callable[[int, Any], bytes | str], **begin: Any) -> bytes:
        """Runs fn(token, lost) once per key: begins an attempt, runs fn with its
        fencing token and the attempt's lost event, then completes with fn's
        result, or abandons if fn raises so a retry runs it again. A key
        already completed answers its stored result without running fn. The
        attempt renews while fn runs without needing progress."""
        b = self.begin(key, fingerprint, progress_timeout=0, **begin)
        if b.attempt is None:
            return b.result or b""
        a = b.attempt
        try:
            result = fn(a.token, a.lost)
        except BaseException:
            try:
                a.abandon()
            except LeaseholdError as e:
                self._c.log.warning("could not abandon an idempotency attempt on %r; it lapses after its TTL: %s", key, e)
            raise
        a.lease.raise_if_lost()  # the attempt was lost while fn ran
        out = result.encode() if isinstance(result, str) else result
        a.complete(out)
        return out
