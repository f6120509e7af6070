"""Watch: the changes a node applies, as an iterator that resumes from the
last index it saw (on the next node when one fails)."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

from .core import Core, as_int
from .errors import LeaseholdError
from .wire import TRANSPORT_ERRORS


def resumable(c: Core, path: str, make: Callable[[int | None], dict[str, Any]], from_index: int | None,
              stop: Callable[[], bool] = lambda: False) -> Iterator[dict[str, Any]]:
    """Streams path with the request make(from_index) builds, and when the
    stream breaks opens it again, on the next node, after the last index seen:
    nothing is missed or repeated."""
    backoff = 0.02
    while not stop():
        n = c.node()
        try:
            for m in n.stream(path, make(from_index)):
                backoff = 0.02
                from_index = as_int(m.get("index"))
                yield m
        except TRANSPORT_ERRORS:
            c.move_on(n)
        except LeaseholdError as e:
            if e.code != "unavailable":
                raise
            c.move_on(n)
        time.sleep(backoff)
        backoff = min(2 * backoff, 1.0)


def watch(c: Core, prefixes: list[str], from_index: int | None = None, renewed: bool = False) -> Iterator[dict[str, Any]]:
    """Every event under prefixes ("" watches everything), as proto JSON
    dicts with "index", "kind", "key", "leaseId", ... (uint64s as ints)."""
    def make(i: int | None) -> dict[str, Any]:
        req: dict[str, Any] = {"prefixes": prefixes, "renewed": renewed}
        if i is not None:
            req["fromIndex"] = str(i)
        return req
    for m in resumable(c, "/leasehold.v1.Watch/Watch", make, from_index):
        for ev in m.get("events", []):
            for k in ("index", "leaseId", "token", "version"):
                ev[k] = as_int(ev.get(k))
            yield ev
