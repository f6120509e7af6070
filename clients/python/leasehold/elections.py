"""Elections: a leadership is a lease on the election's name; its token is
the term's fencing token."""

from __future__ import annotations

import time
from typing import Any, Iterator

from .core import Core, as_int, request_id
from .errors import LeaseholdError
from .lease import AcquireOptions, Lease, hold
from .watch import resumable
from .wire import dur


class Leadership:
    """A won election. It renews, ends and is lost exactly as its lease."""

    def __init__(self, core: Core, name: str, lease: Lease):
        self._c = core
        self.name = name
        self.lease = lease

    @property
    def token(self) -> int:
        return self.lease.token

    @property
    def lost(self):  # the lease's LostEvent
        return self.lease.lost

    @property
    def resources(self) -> list[str]:
        return self.lease.resources

    def proclaim(self, value: str) -> None:
        """Changes the announced value without giving up leadership."""
        self._c.call("/leasehold.v1.Elections/Proclaim",
                     {"leaseId": str(self.lease.id), "secret": self.lease.secret, "value": value, "requestId": request_id()})

    def resign(self) -> None:
        """Gives leadership up; the next candidate in line leads."""
        req = {"leaseId": str(self.lease.id), "secret": self.lease.secret, "requestId": request_id()}
        self.lease._release_with(lambda: self._c.call("/leasehold.v1.Elections/Resign", req))

    def __enter__(self) -> "Leadership":
        return self

    def __exit__(self, *exc: object) -> None:
        self.resign()


class Elections:
    def __init__(self, core: Core):
        self._c = core

    def campaign(self, name: str, value: str, ttl: float = 15.0, wait: float = 3600.0, owner: str = "",
                 progress_timeout: float = 0.0) -> Leadership:
        """Waits (in arrival order, up to wait) until this candidate leads name
        with value. Leadership renews without needing progress unless
        progress_timeout is given."""
        o = AcquireOptions(ttl=ttl, wait=wait, owner=owner, progress_timeout=progress_timeout)
        secret = request_id()
        req = {"election": name, "value": value, "ttl": dur(ttl), "wait": dur(wait), "owner": owner,
               "secret": secret, "requestId": request_id()}
        lease = hold(self._c, [name], o, secret, lambda _: self._c.call(
            "/leasehold.v1.Elections/Campaign", req, per_try=wait + self._c.config.request_timeout,
            deadline=time.monotonic() + wait + self._c.config.call_timeout))
        return Leadership(self._c, name, lease)

    def leader(self, name: str) -> dict[str, Any] | None:
        """Who leads name now (proto JSON: value, token, leaseId, ...); None if nobody."""
        try:
            return self._c.call("/leasehold.v1.Elections/Leader", {"election": name}).get("election")
        except LeaseholdError as e:
            if e.code == "not_found":
                return None
            raise

    def observe(self, name: str, from_index: int | None = None) -> Iterator[tuple[dict[str, Any], int]]:
        """The leader of name, first as it is, then each change, with its log
        index (leaseId 0: nobody leads); resumes after from_index."""
        def make(i: int | None) -> dict[str, Any]:
            return {"election": name, **({"fromIndex": str(i)} if i is not None else {})}
        for m in resumable(self._c, "/leasehold.v1.Elections/Observe", make, from_index):
            if "election" in m:
                e = m["election"]
                e.setdefault("value", "")
                for k in ("leaseId", "token"):
                    e[k] = as_int(e.get(k))
                yield e, as_int(m.get("index"))
