"""Errors: one class with leasehold's own code, as the Go client's sentinels."""

from __future__ import annotations

# leasehold's own codes (the Go root package's Code names).
CODES = ("unknown", "invalid", "not_found", "not_holder", "held", "wait_timeout", "stale_token",
         "limit", "unavailable", "canceled", "permission", "unauthenticated", "version_mismatch",
         "out_of_range", "conflict")

# The code a Connect code stands for when the answer names none of its own
# (api/errors.go's fromConnect).
_BY_CONNECT = {
    "invalid_argument": "invalid", "not_found": "not_found", "failed_precondition": "not_holder",
    "already_exists": "held", "deadline_exceeded": "wait_timeout", "aborted": "stale_token",
    "resource_exhausted": "limit", "unavailable": "unavailable", "canceled": "canceled",
    "permission_denied": "permission", "unauthenticated": "unauthenticated", "out_of_range": "out_of_range",
}


class LeaseholdError(Exception):
    """An error answered by a node, or code "unavailable" when no answer came."""

    def __init__(self, code: str, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after

    def __repr__(self) -> str:
        return f"LeaseholdError({self.code!r}, {self.message!r})"


def from_answer(connect_code: str, own_code: str | None, message: str, retry_after: str | None) -> LeaseholdError:
    code = own_code if own_code in CODES and own_code != "unknown" else _BY_CONNECT.get(connect_code, "unknown")
    return LeaseholdError(code, message, float(retry_after) if retry_after else None)


class LeaseLostError(Exception):
    """The lease ended before its holder released it: work done after that ran without it.

    reason is one of no_progress, deadline, not_renewed, ended, release_unconfirmed, closed.
    """

    def __init__(self, reason: str, message: str):
        super().__init__(f"lease lost: {message}")
        self.reason = reason


class LeaseReleased(Exception):
    """The holder released the lease (the reason a released lease reports)."""

    def __init__(self) -> None:
        super().__init__("lease released")


class InProgressError(Exception):
    """Another attempt owns the idempotency key (and the wait, if any, ran out)."""

    def __init__(self, key: str, owner_token: int):
        super().__init__(f"idempotency key {key!r} is owned by attempt {owner_token}")
        self.owner_token = owner_token


class FingerprintMismatchError(Exception):
    """The idempotency key was first used for a different request."""
