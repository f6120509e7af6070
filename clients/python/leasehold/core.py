"""The core of the client: endpoints, retries with request ids, and the safe
deadline (invariant 3). Each primitive's calls live in a module of its own;
client.py puts them together."""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .batch import Coalescer
from .errors import LeaseholdError
from .wire import TRANSPORT_ERRORS, Node


@dataclass
class Config:
    """Configures a Client. Only endpoints is required. Times are in seconds."""

    endpoints: list[str]
    #: Bearer token sent with every request, if the cluster requires one.
    token: str | None = None
    #: Subtracted from every expiry a node reports, on top of drift_ratio of it.
    drift: float = 0.010
    #: The share of each reported expiry treated as unsafe.
    drift_ratio: float = 0.02
    #: Bounds one attempt of a call that does not wait.
    request_timeout: float = 5.0
    #: Bounds a whole call, retries included, unless the call says otherwise.
    call_timeout: float = 30.0
    #: The most acquires, renewals and releases sent together in one
    #: Leases.Batch request: calls made while earlier requests are out go
    #: together in the next one, sharing one round trip and one commit on the
    #: node. 1 sends each as a call of its own.
    max_batch: int = 128
    #: Warnings about lost and degraded leases and failed renewals.
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("leasehold"))


def request_id() -> str:
    """A fresh request id (or lease secret): 16 random bytes in hex."""
    return os.urandom(16).hex()


class Closed(LeaseholdError):
    def __init__(self) -> None:
        super().__init__("canceled", "client: closed")


class Core:
    """The connection to a cluster that every primitive's calls go through."""

    def __init__(self, config: Config | None = None, *, endpoints: list[str] | None = None, **kw: Any):
        cfg = config or Config(endpoints=endpoints or [], **kw)
        if not cfg.endpoints:
            raise LeaseholdError("invalid", "client: at least one endpoint is required")
        self.config = cfg
        self.log = cfg.logger
        if not 1 <= cfg.max_batch <= 256:
            raise LeaseholdError("invalid", f"client: max_batch {cfg.max_batch} must be 1 to 256")
        self._nodes = [Node(e.strip(), cfg.token) for e in cfg.endpoints]
        #: Sends lease ops together (None with max_batch 1).
        self.batch = Coalescer(self, cfg.max_batch) if cfg.max_batch > 1 else None
        self._cur = 0
        self._closed = False
        self._held: set[Any] = set()
        self._lock = threading.Lock()

    def safe_deadline(self, sent: float, expires_in: float) -> float:
        """The local safe deadline (invariant 3): expires_in counted from sent, a
        time.monotonic() read before the request was sent, less the drift
        allowance, so it is never later than the node's expiry."""
        return sent + expires_in - (self.config.drift + expires_in * self.config.drift_ratio)

    def call(self, path: str, msg: dict[str, Any], per_try: float | None = None, deadline: float | None = None) -> dict[str, Any]:
        """Sends msg to path on the current node, moving to the next and trying
        again while the answer is unavailable (no leader, or no answer at all),
        until deadline (a time.monotonic() time; default now + call_timeout).
        msg is the same on every attempt, so its request id makes a retry
        answer as the first attempt did. per_try bounds each attempt."""
        if self._closed:
            raise Closed()
        per_try = per_try or self.config.request_timeout
        if deadline is None:
            deadline = time.monotonic() + self.config.call_timeout
        backoff = 0.02
        while True:
            i = self._cur % len(self._nodes)
            left = deadline - time.monotonic()
            if left <= 0:
                raise LeaseholdError("unavailable", f"{path}: no answer before the call's deadline")
            try:
                res, leader = self._nodes[i].unary(path, msg, min(per_try, left))
                self._follow(leader)
                return res
            except TRANSPORT_ERRORS as e:
                err = LeaseholdError("unavailable", f"{path}: {e!r}")
            except LeaseholdError as e:
                if e.code != "unavailable":
                    raise
                err = e
            if self._closed:
                raise err
            if len(self._nodes) > 1 and self._cur % len(self._nodes) == i:
                self._cur = i + 1
            if time.monotonic() + backoff >= deadline:
                raise err
            time.sleep(backoff)
            backoff = min(2 * backoff, 1.0)

    def node(self) -> Node:
        return self._nodes[self._cur % len(self._nodes)]

    def move_on(self, n: Node) -> None:
        if self._nodes[self._cur % len(self._nodes)] is n:
            self._cur += 1

    def _follow(self, leader: str | None) -> None:
        if not leader:
            return
        for i, n in enumerate(self._nodes):
            if n.url == leader.rstrip("/"):
                self._cur = i
                return

    def track(self, x: Any) -> bool:
        with self._lock:
            if self._closed:
                return False
            self._held.add(x)
            return True

    def untrack(self, x: Any) -> None:
        with self._lock:
            self._held.discard(x)

    def close(self) -> None:
        """Stops renewing the leases still held, which end at once (lost, reason
        "closed") but are not released: release them first. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            held, self._held = list(self._held), set()
        for x in held:
            x._close_by_client()
        for n in self._nodes:
            n.close_idle()

    def __enter__(self) -> "Core":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def as_int(v: Any) -> int:
    """A uint64 from proto JSON (a string), 0 when absent."""
    return int(v) if v else 0


Callback = Callable[[], None]
