import io
import sqlite3
import threading
import time
import unittest
from wsgiref.util import setup_testing_defaults

from leasehold import (Client, Compare, Delete, FENCE_TABLE_SQL, FingerprintMismatchError, IdempotencyMiddleware,
                       InProgressError, LeaseholdError, LeaseLostError, Put, check_fence, fenced_by, fingerprint_of)

from .node import NodeTestCase, eventually


class PrimitivesTest(NodeTestCase):
    def assertCode(self, code: str, f, *args, **kw) -> None:
        with self.assertRaises(LeaseholdError) as e:
            f(*args, **kw)
        self.assertEqual(e.exception.code, code, e.exception)

    def test_kv_cas_txn_and_fence(self) -> None:
        kv = self.c.kv
        v1 = kv.put("kv/a", "one", if_version=0)
        self.assertCode("version_mismatch", kv.put, "kv/a", "again", if_version=0)
        v2 = kv.put("kv/a", "two", if_version=v1)
        self.assertEqual(kv.get("kv/a").value, b"two")
        self.assertIsNone(kv.get("kv/missing"))
        t = kv.txn([Compare("kv/a", "version_equal", version=v2)], then=[Put("kv/b", "b"), Delete("kv/a")],
                   otherwise=[Put("kv/else", "x")])
        self.assertTrue(t.succeeded)
        self.assertEqual([x.key for x in kv.list("kv/")], ["kv/b"])
        old = self.c.acquire("kv/res", ttl=5)
        kv.put("kv/fenced", "old", fence=fenced_by(old))
        old.release()
        cur = self.c.acquire("kv/res", ttl=5)
        kv.check_fence(fenced_by(cur))
        self.assertCode("stale_token", kv.put, "kv/fenced", "stale", fence=fenced_by(old))
        self.assertCode("stale_token", kv.check_fence, fenced_by(old))
        cur.release()

    def test_watch_resumes_from_an_index(self) -> None:
        seen: list = []
        w = self.c.watch(["w/"])
        t = threading.Thread(target=lambda: [seen.append(ev) for _, ev in zip(range(2), w)])
        t.start()
        time.sleep(0.3)  # the stream opens at the node's last index
        self.c.kv.put("w/1", "a")
        self.c.kv.put("w/2", "b")
        t.join(5)
        self.assertEqual([(e["kind"], e["key"]) for e in seen], [("put", "w/1"), ("put", "w/2")])
        again = next(iter(self.c.watch(["w/"], from_index=seen[0]["index"])))
        self.assertEqual(again["key"], "w/2")

    def test_elections(self) -> None:
        el = self.c.elections
        one = el.campaign("el/x", "one", ttl=2)
        got: dict = {}
        t = threading.Thread(target=lambda: got.update(two=el.campaign("el/x", "two", ttl=2)))
        t.start()
        values: list = []
        obs = threading.Thread(target=lambda: [values.append(e["value"]) for e, _ in
                                               iter_until(el.observe("el/x"), lambda e: e[0]["value"] == "two")])
        obs.start()
        eventually("observed the first leader", 3, lambda: "one" in values)
        one.resign()
        t.join(5)
        obs.join(5)
        self.assertGreater(got["two"].token, one.token)
        self.assertEqual(el.leader("el/x")["value"], "two")
        got["two"].resign()

    def test_queue_order_and_stale_ack(self) -> None:
        q = self.c.queues
        q.create("q1", visibility=1)
        for b in ("m1", "m2"):
            q.send("q1", "k", b)
        [d1] = q.receive("q1", visibility=1)
        self.assertEqual(d1.body, b"m1")
        self.assertEqual(q.receive("q1"), [], "one in flight per key")
        time.sleep(1.2)
        [again] = q.receive("q1", wait=2)
        self.assertEqual(again.body, b"m1")
        self.assertGreater(again.token, d1.token)
        self.assertCode("stale_token", q.ack, d1)
        q.ack(again)
        [d2] = q.receive("q1", wait=2)
        self.assertEqual(d2.body, b"m2")
        q.nack(d2, error="later")

    def test_consume_extends_only_with_progress(self) -> None:
        q = self.c.queues
        q.create("q2", visibility=1)
        q.send("q2", "slow", "busy")
        q.send("q2", "idle", "stuck")
        stop = threading.Event()
        outcome: dict = {}

        def handler(m) -> None:
            end = time.monotonic() + 2.5
            while time.monotonic() < end and not m.lost.is_set():
                if m.body == b"busy":
                    m.progress("step")
                time.sleep(0.05)
            outcome[m.body] = "lost" if m.lost.is_set() else "kept"
            if len(outcome) == 2:
                stop.set()
        q.consume("q2", handler, stop, concurrency=2, visibility=1, poll_wait=0.5)
        self.assertEqual(outcome, {b"busy": "kept", b"stuck": "lost"})

    def test_idempotency(self) -> None:
        idem = self.c.idempotency
        fp = fingerprint_of("POST", "/pay", "10")
        b = idem.begin("id/1", fp, attempt_ttl=5)
        self.assertIsNotNone(b.attempt)
        with self.assertRaises(InProgressError):
            idem.begin("id/1", fp)
        b.attempt.complete("paid")
        self.assertEqual(idem.begin("id/1", fp).result, b"paid")
        with self.assertRaises(FingerprintMismatchError):
            idem.begin("id/1", fingerprint_of("POST", "/pay", "20"))
        idem.begin("id/2", fp).attempt.abandon()
        self.assertIsNotNone(idem.begin("id/2", fp).attempt)

        runs = []

        def fn(token, lost):
            runs.append(token)
            time.sleep(0.3)
            return f"done {token}"
        results: list = []
        ts = [threading.Thread(target=lambda: results.append(idem.idempotent("id/once", fingerprint_of("x"), fn, wait=5)))
              for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(10)
        self.assertEqual(len(runs), 1)
        self.assertEqual(len(set(results)), 1)

    def test_wsgi_middleware(self) -> None:
        runs = []

        def app(environ, start_response):
            runs.append(1)
            body = environ["wsgi.input"].read()
            start_response("201 Created", [("Content-Type", "text/plain")])
            return [b"charged " + body + b" with token %d" % environ["leasehold.idempotency"]["token"]]
        mw = IdempotencyMiddleware(app, self.c.idempotency, prefix="http/", required=True)

        def post(key, body: bytes):
            env: dict = {"REQUEST_METHOD": "POST", "PATH_INFO": "/pay", "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body)}
            setup_testing_defaults(env)
            if key is not None:
                env["HTTP_IDEMPOTENCY_KEY"] = key
            got: dict = {}
            out = b"".join(mw(env, lambda s, h: got.update(status=s, headers=dict(h))))
            return int(got["status"].split()[0]), out, got["headers"].get("Idempotency-Replayed")
        first = post('"k-1"', b"10")
        self.assertEqual(first[0], 201)
        self.assertEqual(post('"k-1"', b"10"), (201, first[1], "true"))
        self.assertEqual(post('"k-1"', b"20")[0], 422)
        self.assertEqual(post(None, b"10")[0], 400)
        self.assertEqual(len(runs), 1)

    def test_sqlite_fence_refuses_a_stale_token(self) -> None:
        db = sqlite3.connect(":memory:", isolation_level=None)
        db.execute(FENCE_TABLE_SQL)
        db.execute("CREATE TABLE ledger (entry text)")
        old = self.c.acquire("fence/sql", ttl=5)
        old.release()
        new = self.c.acquire("fence/sql", ttl=5)

        def write(lease, entry: str) -> None:
            cur = db.cursor()
            cur.execute("BEGIN")
            try:
                check_fence(cur, "fence/sql", lease.token)
                cur.execute("INSERT INTO ledger VALUES (?)", (entry,))
                cur.execute("COMMIT")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
        write(new, "new")
        self.assertCode("stale_token", write, old, "stale")
        write(new, "new again")
        self.assertEqual([r[0] for r in db.execute("SELECT entry FROM ledger")], ["new", "new again"])
        new.release()

    def test_release_after_loss_raises(self) -> None:
        lease = self.c.acquire("t/lost", ttl=0.3, manual_renew=True)
        self.assertTrue(lease.lost.wait(2))
        eventually("expired on the node", 2, lambda: "holder" not in self.c.get("t/lost"))
        with self.assertRaises(LeaseLostError):
            lease.release()


def iter_until(it, done):
    for x in it:
        yield x
        if done(x):
            return


if __name__ == "__main__":
    unittest.main()
