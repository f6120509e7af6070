"""Fencing at the resource: the header a fenced HTTP service checks
(fence/httpfence), and the guard's SQL (as fence/pgfence) for any DB-API
cursor, run inside the caller's own transaction: sqlite3 here, Postgres
(psycopg) with placeholder "%s"."""

from __future__ import annotations

import urllib.request
from typing import Any

from .errors import LeaseholdError

#: The header fence/httpfence reads.
FENCE_HEADER = "Leasehold-Fence"


def fence_header_value(resource: str, token: int) -> str:
    return f"resource={resource}; token={token}"


def fenced_request(url: str, source: Any, resource: str, **kw: Any) -> urllib.request.Request:
    """A urllib Request carrying the Leasehold-Fence header of source's (a
    Lease, Leadership or Attempt) current token for resource. A stale token
    is answered 409 by the service (its JSON body says "stale_token")."""
    req = urllib.request.Request(url, **kw)
    req.add_header(FENCE_HEADER, fence_header_value(resource, source.token))
    return req


#: The guard's table; the same for every language (Postgres; sqlite3 takes it as is).
FENCE_TABLE_SQL = """CREATE TABLE IF NOT EXISTS leasehold_fence (
  resource text PRIMARY KEY, token bigint NOT NULL CHECK (token >= 0),
  updated_at timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP)"""

_CHECK_SQL = """INSERT INTO leasehold_fence AS f (resource, token, updated_at) VALUES ({p}, {p}, CURRENT_TIMESTAMP)
ON CONFLICT (resource) DO UPDATE SET token = excluded.token, updated_at = excluded.updated_at
  WHERE f.token <= excluded.token
RETURNING token"""


def check_fence(cursor: Any, resource: str, token: int, placeholder: str = "?") -> None:
    """Checks token for resource and records it, inside the cursor's
    transaction: run it before the protected write, in the same transaction.
    A stale token (a newer one was recorded) raises code "stale_token": roll
    back. placeholder is the driver's ("?" for sqlite3, "%s" for psycopg)."""
    cursor.execute(_CHECK_SQL.format(p=placeholder), (resource, token))
    if cursor.fetchone() is None:
        raise LeaseholdError("stale_token", f"stale fencing token {token} for {resource!r}: a newer holder has written")
