"""The Python client's acquire+release benchmark: CALLERS threads sharing one
client take and give back a lease of their own for SECONDS, then it prints
the pairs per second as JSON."""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "clients", "python"))

from leasehold import Client, LeaseholdError  # noqa: E402

callers, secs = int(sys.argv[1]), float(sys.argv[2])
c = Client(endpoints=[os.environ["LEASEHOLD_ENDPOINT"]])
counts = {"pairs": 0, "failures": 0}
lock = threading.Lock()
start = time.monotonic()
end = start + secs


def caller(i: int) -> None:
    while time.monotonic() < end:
        try:
            c.acquire(f"bench/python/{i}", ttl=10).release()
            k = "pairs"
        except LeaseholdError:
            k = "failures"
        with lock:
            counts[k] += 1


ts = [threading.Thread(target=caller, args=(i,)) for i in range(callers)]
for t in ts:
    t.start()
for t in ts:
    t.join()
took = time.monotonic() - start
print(json.dumps({**counts, "seconds": took, "per_second": counts["pairs"] / took}))
c.close()
