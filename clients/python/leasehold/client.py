"""Client puts the primitives together over one Core."""

from __future__ import annotations

from typing import Any, Iterator

from .core import Config, Core, request_id
from .elections import Elections
from .errors import LeaseholdError
from .idempotency import Idempotency
from .kv import KV
from .lease import AcquireOptions, Lease, acquire
from .queues import Queues
from .watch import watch


class Client(Core):
    """Talks to a leasehold cluster. One client is meant to be shared by every
    thread of a process.

        client = Client(endpoints=["http://127.0.0.1:7420"])
        with client.lease("reports/nightly", ttl=10) as lease:
            ...
    """

    def __init__(self, config: Config | None = None, **kw: Any):
        super().__init__(config, **kw)
        self.kv = KV(self)
        self.elections = Elections(self)
        self.queues = Queues(self)
        self.idempotency = Idempotency(self)

    def acquire(self, resources: str | list[str], **options: Any) -> Lease:
        """Takes every resource at once, or none (options: AcquireOptions' fields).
        With wait it queues (in one global arrival order) until granted, or
        raises code "wait_timeout". Unless manual_renew, the lease renews in a
        background thread at a third of its TTL while the holder calls
        progress() within progress_timeout (default: the TTL), until release.
        The lease is a context manager that releases on exit."""
        return acquire(self, [resources] if isinstance(resources, str) else list(resources), AcquireOptions(**options))

    #: with client.lease("r", ttl=10) as lease: ...
    lease = acquire

    def get(self, resource: str) -> dict[str, Any]:
        """One resource, as proto JSON: its holder (absent when free), waiters, lock-delay."""
        return self.call("/leasehold.v1.Leases/Get", {"resource": resource})

    def watch(self, prefixes: list[str], from_index: int | None = None, renewed: bool = False) -> Iterator[dict[str, Any]]:
        """Every event under prefixes, resuming from the last index seen."""
        return watch(self, prefixes, from_index, renewed)

    def force_release(self, resource: str, lease_id: int, reason: str) -> None:
        """Ends the lease holding resource (operator), recorded in the audit log with reason."""
        try:
            self.call("/leasehold.v1.Admin/ForceRelease",
                      {"resource": resource, "leaseId": str(lease_id), "reason": reason, "requestId": request_id()})
        except LeaseholdError as e:
            if e.code != "not_found":
                raise
