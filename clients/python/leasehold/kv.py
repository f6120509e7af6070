"""KV: versioned values with compare-and-swap, fenced writes, transactions and
lease-bound keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from .core import Core, as_int, request_id
from .errors import LeaseholdError
from .wire import b64, unb64


@dataclass
class Fence:
    """Names one target; a fenced write applies only while token is current for it."""

    token: int
    resource: str = ""
    group: str = ""
    partition: int = 0
    queue: str = ""
    key: str = ""

    def wire(self) -> dict[str, Any]:
        return {"token": str(self.token), "resource": self.resource, "group": self.group,
                "partition": self.partition, "queue": self.queue, "key": self.key}


def fenced_by(lease: Any, resource: str | None = None) -> Fence:
    """The fence of lease (a Lease, Leadership or Attempt) on resource (default: its first)."""
    return Fence(token=lease.token, resource=resource or lease.resources[0])


@dataclass
class KeyValue:
    value: bytes
    version: int
    lease_id: int
    key: str = ""


@dataclass
class Compare:
    """op is one of version_equal, version_greater, version_less, value_equal, exists, absent."""

    key: str
    op: str
    version: int = 0
    value: bytes = b""

    def wire(self) -> dict[str, Any]:
        return {"key": self.key, "op": "COMPARE_OP_" + self.op.upper(), "version": str(self.version), "value": b64(self.value)}


@dataclass
class Put:
    key: str
    value: bytes | str
    lease: Any = None


@dataclass
class Delete:
    key: str


@dataclass
class TxnResult:
    succeeded: bool
    compares: list[bool]
    results: list[tuple[str, int]]
    index: int


def _op(op: Put | Delete) -> dict[str, Any]:
    if isinstance(op, Put):
        l = op.lease
        return {"put": {"key": op.key, "value": b64(op.value), "leaseId": str(l.id) if l else "0", "leaseSecret": l.secret if l else ""}}
    return {"delete": {"key": op.key}}


class KV:
    def __init__(self, core: Core):
        self._c = core

    def put(self, key: str, value: bytes | str, if_version: int | None = None, fence: Fence | None = None, bind_lease: Any = None) -> int:
        """Writes value under key and answers its version (the log index).
        if_version 0: the key must not exist; a mismatch is code "version_mismatch"."""
        req: dict[str, Any] = {"key": key, "value": b64(value), "requestId": request_id()}
        if if_version is not None:
            req["ifVersion"] = str(if_version)
        if fence:
            req["fence"] = fence.wire()
        if bind_lease is not None:
            req["leaseId"], req["leaseSecret"] = str(bind_lease.id), bind_lease.secret
        return as_int(self._c.call("/leasehold.v1.KV/Put", req).get("version"))

    def get(self, key: str) -> KeyValue | None:
        """Reads key; None if it does not exist."""
        try:
            r = self._c.call("/leasehold.v1.KV/Get", {"key": key})
        except LeaseholdError as e:
            if e.code == "not_found":
                return None
            raise
        return KeyValue(unb64(r.get("value")), as_int(r.get("version")), as_int(r.get("leaseId")), key)

    def delete(self, key: str, if_version: int | None = None, fence: Fence | None = None) -> int:
        req: dict[str, Any] = {"key": key, "requestId": request_id()}
        if if_version is not None:
            req["ifVersion"] = str(if_version)
        if fence:
            req["fence"] = fence.wire()
        return as_int(self._c.call("/leasehold.v1.KV/Delete", req).get("version"))

    def txn(self, compares: list[Compare], then: list[Put | Delete] = (), otherwise: list[Put | Delete] = (),  # type: ignore[assignment]
            fence: Fence | None = None) -> TxnResult:
        """Runs then if every compare holds, else otherwise: in one log entry."""
        req: dict[str, Any] = {"compares": [c.wire() for c in compares], "thenOps": [_op(o) for o in then],
                               "elseOps": [_op(o) for o in otherwise], "requestId": request_id()}
        if fence:
            req["fence"] = fence.wire()
        r = self._c.call("/leasehold.v1.KV/Txn", req)
        return TxnResult(bool(r.get("succeeded")), [bool(x) for x in r.get("compares", [])],
                         [(x["key"], as_int(x.get("version"))) for x in r.get("results", [])], as_int(r.get("index")))

    def list(self, prefix: str) -> Iterator[KeyValue]:
        """Every key under prefix in key order, a page at a time."""
        token = ""
        while True:
            r = self._c.call("/leasehold.v1.KV/List", {"prefix": prefix, "pageSize": 1000, "pageToken": token})
            for it in r.get("items", []):
                yield KeyValue(unb64(it.get("value")), as_int(it.get("version")), as_int(it.get("leaseId")), it["key"])
            token = r.get("nextPageToken", "")
            if not token:
                return

    def check_fence(self, fence: Fence) -> None:
        """Returns if fence's token is current for its target right now (like
        Chubby's CheckSequencer); raises code "stale_token" otherwise."""
        self._c.call("/leasehold.v1.KV/CheckFence", fence.wire())
