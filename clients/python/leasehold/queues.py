"""Keyed queues: send, receive, ack, nack, extend, and consume, which keeps a
delivery visible only while its handler reports progress (as the Go
queue.Consume does)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from .core import Core, as_int, request_id
from .errors import LeaseholdError
from .wire import b64, dur, seconds, unb64


@dataclass
class Delivery:
    queue: str
    key: str
    sequence: int
    #: The delivery's fencing token: write it with the effect.
    token: int
    receives: int
    body: bytes
    consumer: str
    visibility: float
    #: The local safe deadline of its visibility, on time.monotonic()'s clock
    #: (counted from before the receive was sent).
    deadline: float


class Queues:
    def __init__(self, core: Core):
        self._c = core

    def create(self, queue: str, visibility: float = 0, max_receives: int = 0, **settings: Any) -> None:
        """Makes a queue (admin); one that exists with the same settings is answered as it is.
        Other settings by their proto JSON names (maxDepth=..., deadLetter=...)."""
        s: dict[str, Any] = dict(settings)
        if visibility:
            s["visibility"] = dur(visibility)
        if max_receives:
            s["maxReceives"] = max_receives
        self._c.call("/leasehold.v1.Queues/Create", {"queue": queue, "settings": s, "requestId": request_id()})

    def send(self, queue: str, key: str, body: bytes | str, dedup_id: str = "", delay: float = 0) -> int:
        """Enqueues a message and answers its sequence once committed; a retry never enqueues twice."""
        req: dict[str, Any] = {"queue": queue, "key": key, "body": b64(body), "dedupId": dedup_id, "requestId": request_id()}
        if delay:
            req["delay"] = dur(delay)
        return as_int(self._c.call("/leasehold.v1.Queues/Send", req).get("sequence"))

    def receive(self, queue: str, max: int = 1, visibility: float = 0, wait: float = 0, consumer: str = "") -> list[Delivery]:
        """Hands out up to max messages (one per key), each with a safe deadline counted from before the send."""
        req: dict[str, Any] = {"queue": queue, "max": max, "consumer": consumer, "requestId": request_id()}
        if visibility:
            req["visibility"] = dur(visibility)
        if wait:
            req["wait"] = dur(wait)
        # The clock starts before the send: the deliveries cannot be older.
        sent = time.monotonic()
        r = self._c.call("/leasehold.v1.Queues/Receive", req, per_try=wait + self._c.config.request_timeout,
                         deadline=sent + wait + self._c.config.call_timeout)
        out = []
        for d in r.get("deliveries", []):
            vis = seconds(d.get("visibility"))
            out.append(Delivery(d["queue"], d["key"], as_int(d.get("sequence")), as_int(d.get("token")),
                                int(d.get("receives", 0)), unb64(d.get("body")), consumer, vis, self._c.safe_deadline(sent, vis)))
        return out

    def _name(self, d: Delivery) -> dict[str, Any]:
        return {"queue": d.queue, "sequence": str(d.sequence), "token": str(d.token), "consumer": d.consumer}

    def ack(self, d: Delivery) -> None:
        """Removes a delivered message; a stale delivery is refused with code "stale_token"."""
        self._c.call("/leasehold.v1.Queues/Ack", {**self._name(d), "requestId": request_id()})

    def nack(self, d: Delivery, delay: float = 0, error: str = "") -> None:
        """Returns a delivered message to the head of its key, deliverable again after delay."""
        req = {**self._name(d), "error": error, "requestId": request_id()}
        if delay:
            req["delay"] = dur(delay)
        self._c.call("/leasehold.v1.Queues/Nack", req)

    def extend(self, d: Delivery, visibility: float, progress: str = "") -> float:
        """Gives d visibility more from now; answers (and sets) its new safe deadline."""
        sent = time.monotonic()
        self._c.call("/leasehold.v1.Queues/Extend", {**self._name(d), "visibility": dur(visibility), "progress": progress},
                     deadline=d.deadline)
        d.deadline = self._c.safe_deadline(sent, visibility)
        return d.deadline

    def consume(self, queue: str, handler: Callable[["Message"], None], stop: threading.Event, concurrency: int = 1,
                visibility: float = 0, poll_wait: float = 10.0, consumer: str = "", backoff: tuple[float, float] = (1.0, 60.0),
                drain_timeout: float = 10.0) -> None:
        """Runs handler for each message of queue until stop is set: up to
        concurrency keys at once, each key's messages in send order. A handler
        that returns acks its message; one that raises nacks it (again after a
        backoff). The delivery is extended every third of its visibility only if
        the handler called progress() since the last extension; otherwise its
        lost event is set at the safe deadline, before the node hands the
        message to another consumer. On stop, running handlers get
        drain_timeout to finish; the rest are marked lost and nacked at once."""
        free = threading.Semaphore(concurrency)
        running: set[Message] = set()
        lock = threading.Lock()
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="leasehold-consume") as pool:
            while not stop.is_set():
                free.acquire()
                n = 1
                while n < concurrency and free.acquire(blocking=False):
                    n += 1
                try:
                    ds = self.receive(queue, max=n, visibility=visibility, wait=poll_wait, consumer=consumer)
                except LeaseholdError as e:
                    for _ in range(n):
                        free.release()
                    if e.code not in ("unavailable", "limit"):
                        raise
                    stop.wait(0.2)
                    continue
                for _ in range(n - len(ds)):
                    free.release()
                for d in ds:
                    m = Message(self, d)
                    with lock:
                        running.add(m)

                    def run(m: Message = m) -> None:
                        try:
                            self._handle(m, handler, backoff)
                        finally:
                            with lock:
                                running.discard(m)
                            free.release()
                    pool.submit(run)
            end = time.monotonic() + drain_timeout
            while time.monotonic() < end:
                with lock:
                    if not running:
                        break
                time.sleep(0.01)
            with lock:
                for m in running:
                    m._draining = True
                    threading.Event.set(m.lost)

    def _handle(self, m: "Message", handler: Callable[["Message"], None], backoff: tuple[float, float]) -> None:
        m._keep_start()
        failure: BaseException | None = None
        try:
            handler(m)
        except Exception as e:  # the handler's failure nacks its message
            failure = e
        finally:
            m._keep_stop()
        try:
            if m.lost.is_set() and not m._draining:
                return  # its ack would be stale: it went to another consumer
            if failure is None:
                self.ack(m.delivery)
            else:
                delay = 0.0 if m._draining else min(backoff[1], backoff[0] * 2 ** max(0, m.delivery.receives - 1))
                self.nack(m.delivery, delay=delay, error=str(failure)[:512])
        except LeaseholdError as e:
            self._c.log.warning("could not settle message %d of %s: %s", m.delivery.sequence, m.delivery.queue, e)


class _DeadlineEvent(threading.Event):
    def __init__(self, deadline: Callable[[], float]):
        super().__init__()
        self._deadline = deadline

    def is_set(self) -> bool:
        if not super().is_set() and time.monotonic() >= self._deadline():
            self.set()
        return super().is_set()


class Message:
    """A delivery being handled by consume. lost is set at its safe deadline
    (or when consume stops and its drain time ran out)."""

    def __init__(self, q: Queues, d: Delivery):
        self._q = q
        self.delivery = d
        self.lost = _DeadlineEvent(lambda: d.deadline)
        self._progressed = False
        self._note = ""
        self._draining = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    key = property(lambda self: self.delivery.key)
    body = property(lambda self: self.delivery.body)
    token = property(lambda self: self.delivery.token)

    def progress(self, note: str = "") -> None:
        """Records progress: the next extension goes ahead only if there was some."""
        self._progressed = True
        if note:
            self._note = note

    def _keep_start(self) -> None:
        self._thread = threading.Thread(target=self._keep, daemon=True, name=f"leasehold-visibility-{self.delivery.sequence}")
        self._thread.start()

    def _keep_stop(self) -> None:
        self._done.set()
        if self._thread:
            self._thread.join()

    def _keep(self) -> None:
        d = self.delivery
        while True:
            if self._done.wait(max(0.0, min(d.visibility / 3, d.deadline - time.monotonic()))):
                return
            if time.monotonic() >= d.deadline:
                threading.Event.set(self.lost)
                return
            if not self._progressed:
                continue  # no progress: it lapses at the deadline
            self._progressed, note, self._note = False, self._note, ""
            try:
                self._q.extend(d, d.visibility, note)
            except LeaseholdError as e:
                if e.code != "unavailable":
                    threading.Event.set(self.lost)
                    return
