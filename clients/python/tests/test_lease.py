import threading
import time
import unittest

from leasehold import Client, LeaseholdError, LeaseLostError, LeaseReleased

from .node import NodeTestCase, eventually


class LeaseTest(NodeTestCase):
    def test_acquire_refuse_release(self) -> None:
        with self.c.lease("t/basic", ttl=5) as a:
            with self.assertRaises(LeaseholdError) as e:
                self.c.acquire("t/basic", ttl=5)
            self.assertEqual(e.exception.code, "held")
            self.assertEqual(int(self.c.get("t/basic")["holder"]["id"]), a.id)
        self.assertTrue(a.lost.is_set())
        self.assertIsInstance(a.err, LeaseReleased)
        b = self.c.acquire(["t/basic", "t/basic2"], ttl=5)
        self.assertGreater(b.token, a.token)
        b.release()
        b.release()  # a second release does nothing

    # Breaking it on purpose: in hold() (leasehold/lease.py), read `sent`
    # after `r = send(bound)` instead of before it; this test then fails, as
    # the deadline moves by the wait (about 0.5s) past the bound.
    def test_safe_deadline_counts_from_before_the_send(self) -> None:
        ttl = 10.0
        holder = self.c.acquire("t/deadline", ttl=ttl)
        got: dict = {}
        before = time.monotonic()
        t = threading.Thread(target=lambda: got.update(lease=self.c.acquire("t/deadline", ttl=ttl, wait=5)))
        t.start()
        time.sleep(0.5)
        holder.release()
        t.join(10)
        lease = got["lease"]
        # The thread's send happened after `before`; the bound allows for the
        # time the thread took to start (well under the 0.5s wait).
        bound = before + 0.1 + ttl - (0.010 + ttl * 0.02)
        self.assertLessEqual(lease.deadline, bound, f"deadline {lease.deadline - before:.3f}s after the send, more than {bound - before:.3f}")
        self.assertGreater(lease.deadline, before + ttl - (0.010 + ttl * 0.02) - 0.2)
        lease.release()

    def test_renews_only_with_progress(self) -> None:
        ttl = 0.6
        busy = self.c.acquire("t/progress", ttl=ttl)
        end = time.monotonic() + 3 * ttl
        while time.monotonic() < end:
            busy.progress("working")
            time.sleep(0.05)
        self.assertFalse(busy.lost.is_set(), "a holder reporting progress keeps its lease")
        self.assertGreater(int(self.c.get("t/progress")["holder"].get("renewCount", 0)), 0)
        t0 = time.monotonic()
        self.assertTrue(busy.lost.wait(4 * ttl), "without progress the lease is lost")
        self.assertLess(time.monotonic() - t0, 3 * ttl)
        self.assertIsInstance(busy.err, LeaseLostError)
        self.assertEqual(busy.err.reason, "no_progress")
        eventually("the node expires it", 4 * ttl, lambda: "holder" not in self.c.get("t/progress"))
        with self.assertRaises(LeaseLostError):
            busy.release()

    def test_lost_is_set_at_the_safe_deadline_before_the_node_frees_it(self) -> None:
        lease = self.c.acquire("t/event", ttl=1.0, manual_renew=True)
        self.assertTrue(lease.lost.wait(3))
        lost_at = time.monotonic()
        self.assertGreaterEqual(lost_at, lease.deadline)
        self.assertEqual(lease.err.reason, "not_renewed")
        free_at = [0.0]

        def free() -> bool:
            free_at[0] = time.monotonic()
            return "holder" not in self.c.get("t/event")
        eventually("the node frees it", 3, free)
        self.assertLessEqual(lost_at, free_at[0])

    def test_is_set_reads_the_clock(self) -> None:
        # A holder that wakes past its deadline (a pause) sees the loss at once,
        # whether or not the renewal thread has run yet.
        lease = self.c.acquire("t/clock", ttl=5, manual_renew=True)
        lease._stop.set()  # as if the renewal thread had not run since
        lease._deadline = time.monotonic() - 0.001
        self.assertTrue(lease.lost.is_set())
        self.assertIsInstance(lease.err, LeaseLostError)
        self.c.force_release("t/clock", lease.id, "test")

    def test_forced_release_sets_the_event(self) -> None:
        lease = self.c.acquire("t/forced", ttl=0.9, progress_timeout=0)
        self.c.force_release("t/forced", lease.id, "test")
        self.assertTrue(lease.lost.wait(2))
        self.assertEqual(lease.err.reason, "ended")

    def test_fail_closed_and_fail_open(self) -> None:
        dead = Client(endpoints=["http://127.0.0.1:9"], request_timeout=0.3, call_timeout=0.5)
        with self.assertRaises(LeaseholdError) as e:
            dead.acquire("t/fail")
        self.assertEqual(e.exception.code, "unavailable")
        lease = dead.acquire("t/fail", fail_open=True)
        self.assertTrue(lease.degraded)
        self.assertEqual(lease.token, 0)
        lease.release()
        dead.close()

    def test_close_ends_leases(self) -> None:
        own = Client(endpoints=[self.node.url])
        lease = own.acquire("t/close", ttl=2)
        own.close()
        self.assertTrue(lease.lost.is_set())
        self.assertEqual(lease.err.reason, "closed")
        with self.assertRaises(LeaseholdError):
            own.acquire("t/close2")


if __name__ == "__main__":
    unittest.main()
