"""Leases: acquire, renewal in a background thread only while the holder
reports progress, and the safe deadline on time.monotonic() from before the
send (invariant 3), as the Go client (client/lease.go) does."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .core import Core, request_id, as_int
from .errors import LeaseholdError, LeaseLostError, LeaseReleased
from .wire import dur, seconds

_MAX_PROGRESS = 256


@dataclass
class AcquireOptions:
    """Options of one acquire. Times are in seconds."""

    ttl: float = 15.0
    #: Queue up to this long if a resource is held (0: fail at once, code "held").
    wait: float = 0.0
    owner: str = ""
    operation: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    #: After an expiry (not a release) the resources stay blocked this long.
    lock_delay: float = 0.0
    #: The lease ends at this age however often it is renewed.
    max_hold: float = 0.0
    #: Availability over safety when the store is unreachable: a degraded lease
    #: (token 0) instead of an error, and a lease whose renewals cannot get
    #: through degrades instead of ending. Default: fail closed.
    fail_open: bool = False
    #: How long renewal goes on without progress() (None: the TTL; 0: renews without progress).
    progress_timeout: float | None = None
    #: No background renewal: the caller renews with renew().
    manual_renew: bool = False
    #: One of up to n holders of the one resource (a semaphore slot).
    semaphore: int = 0


class LostEvent(threading.Event):
    """Set when the lease ends. is_set() reads the clock too, so a holder that
    was paused past its deadline sees the loss the moment it resumes, before
    the renewal thread has run."""

    def __init__(self, check: Callable[[], None]):
        super().__init__()
        self._check = check

    def is_set(self) -> bool:
        if not super().is_set():
            self._check()
        return super().is_set()


class Lease:
    """A granted lease; use it as a context manager to release it on exit.

    lease.lost is set at the safe deadline (or when the lease is lost, or
    released); lease.err says why. Check lease.lost.is_set() before each
    protected write, and call lease.progress() as the work advances: renewal
    goes on only while the holder reports progress within progress_timeout.
    """

    def __init__(self, core: Core, lease_id: int, secret: str, resources: list[str], token: int,
                 sent: float, expires_in: float, ttl: float, fail_open: bool, progress_timeout: float,
                 auto_renew: bool, degraded: bool = False):
        self._c = core
        self.id = lease_id
        self.secret = secret
        self.resources = resources
        self._token = token
        self._ttl = ttl
        self._fail_open = fail_open
        self._progress_timeout = progress_timeout
        self._auto_renew = auto_renew
        self._mu = threading.Lock()
        self._deadline = core.safe_deadline(sent, expires_in)
        self._next_renew = sent + expires_in / 3
        self._last_progress = time.monotonic()
        self._note = ""
        self._renewing = auto_renew and not degraded
        self._degraded = degraded
        self._released = False
        self.err: BaseException | None = None
        self.lost = LostEvent(self._check_deadline)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def token(self) -> int:
        """The fencing token to present to the protected resource (0 when degraded)."""
        return 0 if self._degraded else self._token

    @property
    def degraded(self) -> bool:
        return self._degraded

    @property
    def deadline(self) -> float:
        """The local safe deadline, on time.monotonic()'s clock."""
        return self._deadline

    def progress(self, note: str = "") -> None:
        """Records progress; note (up to 256 bytes) is shown to operators with the next renewal."""
        b = note.encode()[:_MAX_PROGRESS]
        with self._mu:
            self._last_progress = time.monotonic()
            if note:
                self._note = b.decode(errors="ignore")

    def raise_if_lost(self) -> None:
        if self.lost.is_set() and self.err is not None:
            raise self.err

    def renew(self) -> None:
        """Extends the lease now; it never tries past the local deadline."""
        self._renew(bounded=True)

    def _renew(self, bounded: bool) -> None:
        with self._mu:
            note, deadline = self._note, self._deadline
        req = {"leaseId": str(self.id), "secret": self.secret, "progress": note, "requestId": request_id()}
        sent = time.monotonic()
        r = _lease_op(self._c, "renew", req, deadline if bounded else None)
        expires = seconds(r.get("expiresIn")) or self._ttl
        with self._mu:
            self._deadline = self._c.safe_deadline(sent, expires)
            self._next_renew = sent + expires / 3
            if self._note == note:
                self._note = ""

    def _start(self) -> None:
        if self._degraded:
            return
        self._thread = threading.Thread(target=self._loop, name=f"leasehold-lease-{self.id}", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        retry = 0.0
        try:
            while True:
                with self._mu:
                    now = time.monotonic()
                    deadline, nxt, renewing = self._deadline, self._next_renew, self._renewing
                    if retry > 0:
                        nxt = now + retry
                    pt = self._progress_timeout
                    if renewing and pt > 0 and now - self._last_progress > pt:
                        self._renewing = renewing = False
                        self._c.log.warning("lease %d: holder reported no progress in %.3fs; renewal stops and the lease will lapse", self.id, pt)
                wake = nxt if renewing and nxt < deadline else deadline
                if self._stop.wait(max(0.0, wake - time.monotonic())):
                    return
                if time.monotonic() >= self._deadline:
                    self._lapse()
                    return
                if not renewing:
                    continue
                try:
                    self._renew(bounded=True)
                    retry = 0.0
                except LeaseholdError as e:
                    if self._stop.is_set():
                        return
                    if e.code in ("not_found", "not_holder", "limit", "invalid"):
                        self._end(LeaseLostError("ended", e.message))
                        return
                    # Unreachable or slow: try again soon, never past the deadline.
                    retry = min(max(2 * retry, 0.05), 1.0)
                    self._c.log.warning("lease %d: renewal failed (%s); retrying until the local deadline", self.id, e)
        finally:
            self._c.untrack(self)

    def _check_deadline(self) -> None:
        if self.err is None and not self._degraded and time.monotonic() >= self._deadline:
            self._lapse()

    def _lapse(self) -> None:
        """Ends the lease at its local deadline, or degrades it under fail_open
        when renewals could not reach the store."""
        with self._mu:
            renewing = self._renewing
        if not renewing:
            if not self._auto_renew:
                self._end(LeaseLostError("not_renewed", "not renewed before the local deadline"))
            else:
                self._end(LeaseLostError("no_progress", "no progress reported: renewal stopped"))
            return
        if self._fail_open:
            with self._mu:
                self._degraded = True
            self._stop.set()
            self._c.log.warning("lease %d: leasehold unreachable past the deadline: fail_open keeps it as a degraded lease with token 0", self.id)
            return
        self._end(LeaseLostError("deadline", "no renewal succeeded before the local deadline"))

    def _end(self, err: BaseException) -> None:
        """Marks the lease over; the first reason wins."""
        with self._mu:
            if self.err is not None:
                return
            self.err = err
        self._stop.set()
        self._c.untrack(self)
        threading.Event.set(self.lost)
        if not isinstance(err, LeaseReleased):
            self._c.log.warning("lease %d ended before release: %s", self.id, err)

    def _close_by_client(self) -> None:
        self._end(LeaseLostError("closed", "the client was closed"))

    def release(self) -> None:
        """Stops renewal and gives the lease back. If the node had already ended
        the lease it raises LeaseLostError: the work done since then ran
        without the lease. A second call does nothing."""
        self._release_with(lambda: _lease_op(self._c, "release", {"leaseId": str(self.id), "secret": self.secret,
                                                                  "requestId": request_id()}, None))

    def _release_with(self, send: Callable[[], Any]) -> None:
        self._stop.set()
        with self._mu:
            self._renewing = False
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        if self._released or isinstance(self.err, LeaseReleased):
            return
        if self._degraded and self.id == 0:
            self._end(LeaseReleased())
            return
        try:
            send()
        except LeaseholdError as e:
            if e.code == "not_found":
                self._released = True
                lost = LeaseLostError("ended", f"lease {self.id} had already ended when released; work done after that ran without it")
                self._end(lost)
                raise lost from e
            # Renewal has stopped, so the lease ends at its deadline either way.
            self._end(LeaseLostError("release_unconfirmed", f"the release could not be confirmed: {e}"))
            raise
        self._released = True
        self._end(LeaseReleased())

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def hold(c: Core, resources: list[str], o: AcquireOptions, secret: str, send: Callable[[float | None], dict[str, Any]]) -> Lease:
    """Sends a request for a lease (an acquire, a campaign) and keeps what it
    grants as a Lease renewed in the background: the clock starts before the
    send, and a long wait is followed by a renewal."""
    pt = o.ttl if o.progress_timeout is None else o.progress_timeout
    bound = time.monotonic() + o.wait + c.config.request_timeout if o.fail_open else None
    # The clock starts before the send: the grant cannot be earlier.
    sent = time.monotonic()
    try:
        r = send(bound)
    except LeaseholdError as e:
        if o.fail_open and e.code == "unavailable":
            c.log.warning("leasehold unreachable: fail_open hands out a degraded lease with token 0; fenced resources will refuse it (%s)", e)
            return Lease(c, 0, "", resources, 0, sent, 0, o.ttl, True, pt, not o.manual_renew, degraded=True)
        raise
    g = r["lease"]
    held = g.get("resources", resources)
    if not (g.get("limit") and len(held) == 1):
        held = resources  # a semaphore's lease holds its slot, not the name asked for
    expires = seconds(r.get("expiresIn")) or o.ttl
    lease = Lease(c, as_int(g.get("id")), secret or r.get("secret", ""), held, as_int(g.get("token")), sent, expires, o.ttl,
                  o.fail_open, pt, not o.manual_renew)
    # After a long wait the deadline counted from the send is near or past:
    # renew at once to count from a fresh send instead.
    if lease.deadline - time.monotonic() < expires / 2:
        try:
            lease._renew(bounded=False)
        except LeaseholdError as e:
            lease._end(LeaseLostError("ended", f"renewing right after a long wait failed: {e}"))
            try:
                c.call("/leasehold.v1.Leases/Release", {"leaseId": str(lease.id), "secret": lease.secret, "requestId": request_id()})
            except LeaseholdError:
                pass
            raise
    if not c.track(lease):
        lease._end(LeaseLostError("closed", "the client was closed"))
        raise LeaseholdError("canceled", "client: closed")
    lease._start()
    return lease


def acquire(c: Core, resources: list[str], o: AcquireOptions) -> Lease:
    if o.semaphore < 0 or o.semaphore > 1000:
        raise LeaseholdError("invalid", f"semaphore limit {o.semaphore} is outside 1 to 1000")
    secret = request_id()
    req: dict[str, Any] = {"resources": resources, "ttl": dur(o.ttl), "owner": o.owner, "operation": o.operation,
                           "metadata": o.metadata, "secret": secret, "requestId": request_id(), "limit": o.semaphore}
    if o.wait > 0:
        req["wait"] = dur(o.wait)
    if o.lock_delay > 0:
        req["lockDelay"] = dur(o.lock_delay)
    if o.max_hold > 0:
        req["maxHold"] = dur(o.max_hold)

    def send(bound: float | None) -> dict[str, Any]:
        deadline = bound or time.monotonic() + o.wait + c.config.call_timeout
        if c.batch is not None:
            r = c.batch.do({"acquire": req}, deadline)
            if "acquire" in r:
                return r["acquire"]
        # Alone, or queued by a batch: the same request (same id and secret)
        # to Acquire waits for its place in line.
        return c.call("/leasehold.v1.Leases/Acquire", req, per_try=o.wait + c.config.request_timeout, deadline=deadline)
    return hold(c, resources, o, secret, send)


def _lease_op(c: Core, kind: str, req: dict[str, Any], deadline: float | None) -> dict[str, Any]:
    """A renew or release, in a batch unless the client sends each alone."""
    if c.batch is not None:
        return c.batch.do({kind: req}, deadline).get(kind, {})
    return c.call(f"/leasehold.v1.Leases/{kind.capitalize()}", req, deadline=deadline)
