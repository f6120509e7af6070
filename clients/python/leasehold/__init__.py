"""leasehold's Python client: standard library only (Connect JSON over
http.client, a thread per lease for renewal)."""

import logging

from .client import Client
from .core import Config
from .errors import (FingerprintMismatchError, InProgressError, LeaseholdError, LeaseLostError, LeaseReleased)
from .fence import FENCE_HEADER, FENCE_TABLE_SQL, check_fence, fence_header_value, fenced_request
from .idempotency import Attempt, Begun, fingerprint_of
from .kv import Compare, Delete, Fence, KeyValue, Put, TxnResult, fenced_by
from .lease import AcquireOptions, Lease
from .elections import Leadership
from .queues import Delivery, Message
from .wsgi import IdempotencyMiddleware

__all__ = ["Client", "Config", "LeaseholdError", "LeaseLostError", "LeaseReleased", "InProgressError",
           "FingerprintMismatchError", "FENCE_HEADER", "FENCE_TABLE_SQL", "check_fence", "fence_header_value",
           "fenced_request", "Attempt", "Begun", "fingerprint_of", "Compare", "Delete", "Fence", "KeyValue", "Put",
           "TxnResult", "fenced_by", "AcquireOptions", "Lease", "Leadership", "Delivery", "Message", "IdempotencyMiddleware"]

# A library stays quiet unless the application configures logging.
logging.getLogger("leasehold").addHandler(logging.NullHandler())
