"""The coalescer sends the acquires, renewals and releases that a client's
threads make at the same moment in one Leases.Batch request (as the Go
client's client/batch.go): one round trip and, on the node, one log entry
and one fsync for all of them. A call made while the line is idle goes out
at once, alone; while BATCH_INFLIGHT requests are out, calls wait and go
together in the next one. Requests go from sender threads, so a caller
leaves at its own deadline; a grant that comes after its caller left is
given back. Every op carries its
request id, so a batch retried after a lost answer acts once."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from .errors import LeaseholdError, from_answer

#: How many Batch requests a client keeps out at once (the Go client's batchInflight).
BATCH_INFLIGHT = 4


class _Call:
    __slots__ = ("op", "result", "error", "done", "left")

    def __init__(self, op: dict[str, Any]):
        self.op = op
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.left = False  # the caller gave up: what the op gets is given back


class Coalescer:
    def __init__(self, core: Any, max_ops: int):
        self._c = core
        self._max = max_ops
        self._lock = threading.Lock()
        self._queue: list[_Call] = []
        self._inflight = 0

    def do(self, op: dict[str, Any], deadline: float | None = None) -> dict[str, Any]:
        """Sends op (one BatchOp as proto JSON: {"acquire": {...}}) with whatever
        else is waiting, and answers its result; an error result is raised."""
        call = _Call(op)
        with self._lock:
            self._queue.append(call)
            lead = self._inflight < BATCH_INFLIGHT
            if lead:
                self._inflight += 1
        if lead:
            batch = self._take()
            if batch == [call]:
                # Alone: sent from the caller's thread, within its deadline.
                self._post(batch, deadline)
                self._next()
            elif batch:
                # Others' calls too: from a thread of its own, so that the
                # caller can leave at its deadline.
                threading.Thread(target=self._send, args=(batch,), daemon=True, name="leasehold-batch").start()
        if not call.done.wait(None if deadline is None else max(0.0, deadline - time.monotonic())):
            with self._lock:
                call.left = not call.done.is_set()
            if call.left:
                raise LeaseholdError("unavailable", "no answer before the deadline")
        if call.error is not None:
            raise call.error
        r = call.result or {}
        if "error" in r:
            e = r["error"]
            raise from_answer(e.get("code", "unknown"), e.get("leaseholdCode"), e.get("message", ""), None)
        return r

    def _take(self) -> list[_Call]:
        """Takes the waiting calls (up to the most per request) for the holder
        of an inflight slot; with nothing waiting it gives the slot up."""
        with self._lock:
            if not self._queue:
                self._inflight -= 1
                return []
            batch, self._queue = self._queue[:self._max], self._queue[self._max:]
            return batch

    def _next(self) -> None:
        """Sends what came meanwhile from a thread, or gives the slot up."""
        batch = self._take()
        if batch:
            threading.Thread(target=self._send, args=(batch,), daemon=True, name="leasehold-batch").start()

    def _send(self, batch: list[_Call]) -> None:
        while batch:
            self._post(batch, None)
            batch = self._take()

    def _post(self, batch: list[_Call], deadline: float | None) -> None:
        try:
            res = self._c.call("/leasehold.v1.Leases/Batch", {"ops": [b.op for b in batch]},
                               deadline=deadline or time.monotonic() + self._c.config.call_timeout)
            results = res.get("results", [])
            for i, b in enumerate(batch):
                b.result = results[i] if i < len(results) else {}
        except BaseException as e:
            for b in batch:
                b.error = e
        for b in batch:
            with self._lock:
                b.done.set()
                left = b.left
            if left:
                self._give_back(b)

    def _give_back(self, b: _Call) -> None:
        """Releases a grant whose caller left. (A place in line nobody waits
        for is withdrawn by the node after its grace.)"""
        grant = (b.result or {}).get("acquire")
        if not grant:
            return
        try:
            self._c.call("/leasehold.v1.Leases/Release", {"leaseId": grant["lease"]["id"], "secret": b.op["acquire"]["secret"],
                                                          "requestId": os.urandom(16).hex()})
        except LeaseholdError:
            pass
