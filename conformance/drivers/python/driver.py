"""The Python client's conformance driver: runs one scenario file against
LEASEHOLD_ENDPOINT with the client's public API (clients/python), reporting
each step as a JSON line."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from typing import Any, Callable

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "clients", "python"))

from leasehold import Client, LeaseholdError, fenced_by, fenced_request, fingerprint_of  # noqa: E402

scenario = json.load(open(sys.argv[1]))
prefix = os.environ.get("LEASEHOLD_PREFIX", "")
c = Client(endpoints=[os.environ["LEASEHOLD_ENDPOINT"]])
out_lock = threading.Lock()


def emit(m: dict[str, Any]) -> None:
    with out_lock:
        sys.stdout.write(json.dumps(m) + "\n")
        sys.stdout.flush()


leases: dict[str, Any] = {}
pending: dict[str, threading.Thread] = {}
errors: dict[str, BaseException] = {}
order: list[str] = []
deliveries: dict[str, Any] = {}


def code(f: Callable[[], Any]) -> str:
    try:
        f()
        return "ok"
    except LeaseholdError as e:
        return e.code
    except Exception as e:  # a lost lease on release, say
        return type(e).__name__


def expect(s: dict, f: Callable[[], Any]) -> None:
    want = s.get("expect", "ok")
    got = code(f)
    if got != want:
        raise AssertionError(f"{s['op']}: got {got}, want {want}")


def lost(l: Any) -> bool:
    """What a holder checks before each protected write: is_set() reads the clock."""
    return l.lost.is_set()


def reason(l: Any) -> str:
    return getattr(l.err, "reason", "released")


def poll(within_ms: int, f: Callable[[], None]) -> None:
    end = time.monotonic() + within_ms / 1000
    while True:
        try:
            f()
            return
        except Exception:
            if time.monotonic() > end:
                raise
        time.sleep(0.01)


def acquire(s: dict) -> Any:
    kw: dict[str, Any] = {"ttl": s["ttl_ms"] / 1000, "wait": s.get("wait_ms", 0) / 1000}
    if s.get("progress_timeout_ms") is not None:
        kw["progress_timeout"] = s["progress_timeout_ms"] / 1000
    l = c.acquire(prefix + s["resource"], **kw)
    leases[s["as"]] = l
    return l


def op_acquire_async(s: dict) -> None:
    def run() -> None:
        try:
            l = acquire(s)
            order.append(s["as"])
            l.release()
        except BaseException as e:
            errors[s["as"]] = e
    t = threading.Thread(target=run, daemon=True)
    pending[s["as"]] = t
    t.start()


def op_await(s: dict) -> None:
    pending[s["as"]].join(30)
    if s["as"] in errors:
        raise errors[s["as"]]


def op_waiters(s: dict) -> None:
    def f() -> None:
        n = len(c.get(prefix + s["resource"]).get("waiters", []))
        assert n == s["count"], f"{n} waiters, want {s['count']}"
    poll(s["within_ms"], f)


def op_expect_order(s: dict) -> None:
    assert order == s["names"], f"granted in order {order}, want {s['names']}"


def op_progress_for(s: dict) -> None:
    l = leases[s["lease"]]
    end = time.monotonic() + s["ms"] / 1000
    while time.monotonic() < end:
        if lost(l):
            raise AssertionError(f"lost while reporting progress: {l.err}")
        l.progress("working")
        time.sleep(s["every_ms"] / 1000)


def op_expect_lost(s: dict) -> None:
    l = leases[s["lease"]]
    if not l.lost.wait(s["within_ms"] / 1000):
        raise AssertionError(f"not lost within {s['within_ms']}ms")
    if s.get("reason") and reason(l) != s["reason"]:
        raise AssertionError(f"lost as {reason(l)} ({l.err}), want {s['reason']}")


def op_expect_free(s: dict) -> None:
    def f() -> None:
        h = c.get(prefix + s["resource"]).get("holder")
        assert h is None, f"still held by lease {h and h['id']}"
    poll(s["within_ms"], f)


def op_sync(s: dict) -> None:
    emit({"sync": s["name"]})
    if s.get("wait"):
        sys.stdin.readline()


def op_work_until_lost(s: dict) -> None:
    l = leases[s["lease"]]
    end = time.monotonic() + s["max_ms"] / 1000
    while time.monotonic() < end:
        if lost(l):
            emit({"event": "lost", "reason": reason(l)})
            return
        emit({"event": "work"})
        l.progress("working")
        time.sleep(s["every_ms"] / 1000)
    raise AssertionError("never lost")


def op_http_fence(s: dict) -> None:
    req = fenced_request(os.environ["LEASEHOLD_FENCE_URL"], leases[s["lease"]], prefix + s["resource"], method="POST", data=b"")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status = r.status
    except urllib.error.HTTPError as e:
        status = e.code
    assert status == s["expect_status"], f"fenced request answered {status}, want {s['expect_status']}"


def op_queue_receive(s: dict) -> None:
    ds = c.queues.receive(prefix + s["queue"], max=s.get("max", 1), visibility=s.get("visibility_ms", 0) / 1000,
                          wait=s.get("wait_ms", 0) / 1000)
    for d in ds:
        deliveries[s["as"] + d.body.decode()] = d
    got, want = sorted(d.body.decode() for d in ds), sorted(s["expect_bodies"])
    assert got == want, f"received {got}, want {want}"


def op_idem_concurrent(s: dict) -> None:
    runs: list[int] = []

    def fn(token: int, lost_event: Any) -> str:
        runs.append(token)
        time.sleep(s["work_ms"] / 1000)
        return f"done by {token}"
    key, fp = prefix + s["key"], fingerprint_of("conformance")
    results: list = [None] * s["callers"]
    fails: list = []

    def caller(i: int) -> None:
        try:
            results[i] = c.idempotency.idempotent(key, fp, fn, wait=10)
        except BaseException as e:
            fails.append(e)
    ts = [threading.Thread(target=caller, args=(i,)) for i in range(s["callers"])]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    if fails:
        raise fails[0]
    results.append(c.idempotency.idempotent(key, fp, fn))
    assert len(runs) == 1, f"the work ran {len(runs)} times"
    assert len(set(results)) == 1, f"results differ: {results}"


def op_expect_deadline_from_send(s: dict) -> None:
    resource, ttl = prefix + s["resource"], s["ttl_ms"] / 1000
    h = c.acquire(resource, ttl=ttl)
    got: dict[str, Any] = {}

    def waiter() -> None:
        got["sent"] = time.monotonic()
        got["lease"] = c.acquire(resource, ttl=ttl, wait=60)
    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(s["held_for_ms"] / 1000)
    h.release()
    t.join(30)
    l = got["lease"]
    l.release()
    after, bound = (l.deadline - got["sent"]) * 1000, s["ttl_ms"] - 10 - s["ttl_ms"] * 0.02
    assert after <= bound + s["slack_ms"], \
        f"deadline {after:.1f}ms after the send, more than ttl less the drift allowance ({bound}ms): counted from later than the send"
    assert after >= bound - s["held_for_ms"] / 2, f"deadline {after:.1f}ms after the send, far less than {bound}ms"


OPS: dict[str, Callable[[dict], Any]] = {
    "acquire": lambda s: expect(s, lambda: acquire(s)),
    "acquire_async": op_acquire_async,
    "await": op_await,
    "waiters": op_waiters,
    "expect_order": op_expect_order,
    "release": lambda s: expect(s, leases[s["lease"]].release),
    "progress_for": op_progress_for,
    "expect_lost": op_expect_lost,
    "expect_free": op_expect_free,
    "emit": lambda s: emit({"lease": s["lease"], "id": leases[s["lease"]].id, "token": leases[s["lease"]].token,
                            "resource": prefix + s["resource"]}),
    "sync": op_sync,
    "work_until_lost": op_work_until_lost,
    "fenced_put": lambda s: expect(s, lambda: c.kv.put(prefix + s["key"], "v", fence=fenced_by(leases[s["lease"]], prefix + s["resource"]))),
    "check_fence": lambda s: expect(s, lambda: c.kv.check_fence(fenced_by(leases[s["lease"]], prefix + s["resource"]))),
    "http_fence": op_http_fence,
    "queue_create": lambda s: expect(s, lambda: c.queues.create(prefix + s["queue"], visibility=s.get("visibility_ms", 0) / 1000)),
    "queue_send": lambda s: expect(s, lambda: c.queues.send(prefix + s["queue"], s["key"], s["body"])),
    "queue_receive": op_queue_receive,
    "queue_ack": lambda s: expect(s, lambda: c.queues.ack(deliveries[s["delivery"]])),
    "sleep": lambda s: time.sleep(s["ms"] / 1000),
    "idem_concurrent": op_idem_concurrent,
    "expect_deadline_from_send": op_expect_deadline_from_send,
}

for i, s in enumerate(scenario["steps"]):
    try:
        if s["op"] not in OPS:
            raise AssertionError(f"unknown op {s['op']}")
        OPS[s["op"]](s)
        emit({"step": i, "op": s["op"], "ok": True})
    except BaseException:
        emit({"step": i, "op": s["op"], "ok": False, "error": traceback.format_exc()})
        c.close()
        sys.exit(1)
emit({"done": True})
c.close()
