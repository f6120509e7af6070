// Errors: one class with leasehold's own code, as the Go client's sentinels.

import { Code, ConnectError } from "@connectrpc/connect";
import { codeFromString } from "@connectrpc/connect/protocol-connect";

/** leasehold's own error codes (the Go root package's Code names). */
export type ErrorCode =
  | "unknown" | "invalid" | "not_found" | "not_holder" | "held" | "wait_timeout"
  | "stale_token" | "limit" | "unavailable" | "canceled" | "permission"
  | "unauthenticated" | "version_mismatch" | "out_of_range" | "conflict";

const codes: readonly ErrorCode[] = ["unknown", "invalid", "not_found", "not_holder", "held",
  "wait_timeout", "stale_token", "limit", "unavailable", "canceled", "permission",
  "unauthenticated", "version_mismatch", "out_of_range", "conflict"];

// The code a Connect code stands for when the answer names none of its own
// (api/errors.go's fromConnect).
const byConnect: Partial<Record<Code, ErrorCode>> = {
  [Code.InvalidArgument]: "invalid", [Code.NotFound]: "not_found",
  [Code.FailedPrecondition]: "not_holder", [Code.AlreadyExists]: "held",
  [Code.DeadlineExceeded]: "wait_timeout", [Code.Aborted]: "stale_token",
  [Code.ResourceExhausted]: "limit", [Code.Unavailable]: "unavailable",
  [Code.Canceled]: "canceled", [Code.PermissionDenied]: "permission",
  [Code.Unauthenticated]: "unauthenticated", [Code.OutOfRange]: "out_of_range",
};

/** An error answered by a node (or a transport failure, code "unavailable"). */
export class LeaseholdError extends Error {
  override name = "LeaseholdError";
  constructor(readonly code: ErrorCode, message: string, readonly retryAfterMs?: number) {
    super(message);
  }
}

/** Why a lease ended before its holder released it. */
export type LostReason = "no_progress" | "deadline" | "not_renewed" | "ended" | "release_unconfirmed" | "closed";

/**
 * The lease ended before its holder released it (the AbortSignal's reason):
 * work done after that was done without the lease.
 */
export class LeaseLostError extends Error {
  override name = "LeaseLostError";
  constructor(readonly reason: LostReason, message: string, options?: { cause?: unknown }) {
    super(`lease lost: ${message}`, options);
  }
}

/** The holder released the lease (the AbortSignal's reason after release). */
export class LeaseReleasedError extends Error {
  override name = "LeaseReleasedError";
  constructor() { super("lease released"); }
}

/** A node's answer, as opposed to a failure to get one. */
export function isWireError(e: ConnectError): boolean {
  return e.metadata.get("content-type") !== null;
}

/** Turns what a call threw into a LeaseholdError. */
export function fromConnect(err: unknown): LeaseholdError {
  if (err instanceof LeaseholdError) return err;
  const ce = ConnectError.from(err);
  const retry = ce.metadata.get("retry-after");
  const retryAfterMs = retry ? Number(retry) * 1000 : undefined;
  if (!isWireError(ce)) {
    // No answer came (a reset, a refused connection, this attempt's own
    // timeout): the request id makes trying again safe.
    return new LeaseholdError("unavailable", ce.message);
  }
  const own = ce.metadata.get("leasehold-error-code") as ErrorCode | null;
  const code = own && codes.includes(own) && own !== "unknown" ? own : byConnect[ce.code] ?? "unknown";
  return new LeaseholdError(code, ce.rawMessage, retryAfterMs);
}

/** Turns an op's error in a Batch answer (a Connect code name and leasehold's own) into a LeaseholdError. */
export function fromBatchError(e: { code: string; message: string; leaseholdCode: string }): LeaseholdError {
  const own = e.leaseholdCode as ErrorCode;
  const connect = codeFromString(e.code);
  const code = codes.includes(own) && own !== "unknown" ? own : (connect !== undefined && byConnect[connect]) || "unknown";
  return new LeaseholdError(code, e.message);
}

/** Whether err is a LeaseholdError with code. */
export function isCode(err: unknown, code: ErrorCode): boolean {
  return err instanceof LeaseholdError && err.code === code;
}
