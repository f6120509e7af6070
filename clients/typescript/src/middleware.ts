// An Express-style middleware (req, res, next) for the IETF draft "The
// Idempotency-Key HTTP Header Field", like the Go idempotency/httpidem: the
// first request with a key runs the handler and stores its status, selected
// headers and body; a retry gets the stored response (Idempotency-Replayed:
// true); a concurrent one 409; the key reused for another request 422; a
// missing key where one is required 400; a 5xx is not stored (the attempt
// is abandoned, so a retry runs again). Errors are application/problem+json.
// The stored form and the fingerprint are httpidem's, so Go, TypeScript and
// Python services can share keys.

import type { IncomingMessage, ServerResponse } from "node:http";

import { fromConnect } from "./errors.js";
import { fingerprintOf, FingerprintMismatchError, InProgressError, type Attempt, type IdempotencyApi } from "./idempotency.js";

export interface IdempotencyMiddlewareConfig {
  idempotency: IdempotencyApi;
  /** Prepended to every key (a namespace such as "payments/"). */
  prefix?: string;
  /** A request without a key gets 400 (default: it runs without one). */
  required?: boolean;
  attemptTtlMs?: number;
  /** Larger bodies get 413 (default 1 MiB). */
  maxBodyBytes?: number;
  /** Response headers stored and replayed (default Content-Type, Location, Cache-Control). */
  headers?: string[];
  /** Statuses not stored: the attempt is abandoned (default: 5xx). */
  retryable?: (status: number) => boolean;
}

/** What the middleware puts on the request for the handler. */
export interface IdempotentRequest extends IncomingMessage {
  /** The key and the attempt's fencing token (fence the effect with it), and a signal aborted if the attempt is lost. */
  idempotency?: { key: string; token: bigint; signal: AbortSignal };
  /** The request body as read by the middleware (set as body too if nothing parsed it). */
  rawBody?: Buffer;
  body?: unknown;
}

export const idempotencyKeyHeader = "idempotency-key";
export const replayedHeader = "Idempotency-Replayed";
const maxKeyLen = 200;

interface Stored { s: number; h?: Record<string, string[]>; b?: string }

export function idempotencyMiddleware(cfg: IdempotencyMiddlewareConfig) {
  const headers = cfg.headers ?? ["Content-Type", "Location", "Cache-Control"];
  const retryable = cfg.retryable ?? ((s: number) => s >= 500);
  const maxBody = cfg.maxBodyBytes ?? 1 << 20;
  return async (req: IdempotentRequest, res: ServerResponse, next: (err?: unknown) => void): Promise<void> => {
    const raw = req.headers[idempotencyKeyHeader];
    if (raw === undefined) {
      if (cfg.required) return problem(res, 400, "Idempotency-Key is missing", "This endpoint requires an Idempotency-Key header.");
      return next();
    }
    const key = parseKey(Array.isArray(raw) ? raw : [raw]);
    if (key instanceof Error) return problem(res, 400, "Idempotency-Key is malformed", key.message);
    const body = await readBody(req, maxBody);
    if (body === null) return problem(res, 413, "The request body is too large", `The body may be up to ${maxBody} bytes.`);
    const path = (req.url ?? "/").split("?")[0];
    let attempt: Attempt;
    try {
      const b = await cfg.idempotency.begin((cfg.prefix ?? "") + key, fingerprintOf(req.method ?? "", path, body),
        { attemptTtlMs: cfg.attemptTtlMs ?? 10_000, progressTimeoutMs: 0 });
      if (!b.attempt) return replay(res, b.result);
      attempt = b.attempt;
    } catch (err) {
      if (err instanceof FingerprintMismatchError) {
        return problem(res, 422, "Idempotency-Key reused with a different request", "This key was first used with another method, path or body.");
      }
      if (err instanceof InProgressError) {
        return problem(res, 409, "A request with this Idempotency-Key is in progress", "Retry later with the same key to get its result.");
      }
      const e = fromConnect(err);
      if (e.code === "invalid") return problem(res, 400, "Idempotency-Key is not acceptable", e.message);
      return problem(res, 503, "The idempotency store is unavailable", e.message);
    }
    req.idempotency = { key, token: attempt.token, signal: attempt.signal };
    capture(res, async (status, chunks, send) => {
      const lost = () => problem(res, 409, "The request outlived its idempotency attempt",
        "Another request with the same Idempotency-Key took over; retry with the same key to get the result.");
      if (attempt.lease.lost) return lost();
      if (retryable(status)) {
        await attempt.abandon().catch(() => {});
        return send();
      }
      const s: Stored = { s: status, h: {}, b: Buffer.concat(chunks).toString("base64") };
      for (const h of headers) {
        const v = res.getHeader(h);
        if (v !== undefined) s.h![canonical(h)] = Array.isArray(v) ? v : [String(v)];
      }
      try {
        await attempt.complete(JSON.stringify(s));
      } catch (err) {
        if (fromConnect(err).code === "stale_token") return lost();
      }
      send();
    });
    next();
  };
}

// capture holds the handler's response back until done has stored it;
// done sends it (send) or something else instead.
function capture(res: ServerResponse, done: (status: number, chunks: Buffer[], send: () => void) => Promise<void>): void {
  const chunks: Buffer[] = [];
  const { write, end, writeHead } = res;
  const toBuf = (c: unknown, enc?: unknown) => (Buffer.isBuffer(c) ? c : Buffer.from(c as string, typeof enc === "string" ? (enc as BufferEncoding) : "utf8"));
  const restore = () => { res.write = write; res.end = end; res.writeHead = writeHead; };
  res.writeHead = ((status: number, ...rest: unknown[]) => {
    res.statusCode = status;
    const h = rest.find((x) => typeof x === "object" && x !== null) as Record<string, string> | undefined;
    if (h) for (const [k, v] of Object.entries(h)) res.setHeader(k, v);
    return res;
  }) as typeof res.writeHead;
  res.write = ((chunk: unknown, enc?: unknown, cb?: unknown) => {
    chunks.push(toBuf(chunk, enc));
    (typeof enc === "function" ? enc : cb as (() => void) | undefined)?.();
    return true;
  }) as typeof res.write;
  res.end = ((chunk?: unknown, enc?: unknown) => {
    if (chunk !== undefined && typeof chunk !== "function") chunks.push(toBuf(chunk, enc));
    restore();
    void done(res.statusCode, chunks, () => { res.end(Buffer.concat(chunks)); });
    return res;
  }) as typeof res.end;
}

function replay(res: ServerResponse, result: Uint8Array): void {
  let s: Stored;
  try {
    s = JSON.parse(Buffer.from(result).toString());
    if (!s.s) throw new Error("no status");
  } catch {
    return problem(res, 500, "The stored response cannot be replayed", "The result stored for this key is not a response this server wrote.");
  }
  for (const [k, v] of Object.entries(s.h ?? {})) res.setHeader(k, v);
  res.setHeader(replayedHeader, "true");
  res.statusCode = s.s;
  res.end(Buffer.from(s.b ?? "", "base64"));
}

// parseKey accepts the draft's sf-string ("...") and, leniently, a bare token.
function parseKey(values: string[]): string | Error {
  if (values.length > 1 || values[0].includes(",")) return new Error("send exactly one Idempotency-Key header");
  let v = values[0].trim();
  if (v.startsWith('"')) {
    if (!v.endsWith('"') || v.length < 2 || /["\\]/.test(v.slice(1, -1))) {
      return new Error('the Idempotency-Key value must be a quoted string like "8e03978e-40d5-43e8-bc93-6894a57f9324"');
    }
    v = v.slice(1, -1);
  }
  if (v === "" || v.length > maxKeyLen) return new Error(`the Idempotency-Key must be 1 to ${maxKeyLen} characters`);
  if (!/^[\x20-\x7e]+$/.test(v)) return new Error("the Idempotency-Key must be printable ASCII");
  return v;
}

async function readBody(req: IdempotentRequest, max: number): Promise<Buffer | null> {
  if (Buffer.isBuffer(req.body)) return req.body;
  if (typeof req.body === "string") return Buffer.from(req.body);
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const c of req) {
    n += c.length;
    if (n > max) return null;
    chunks.push(c);
  }
  const body = Buffer.concat(chunks);
  req.rawBody = body;
  if (req.body === undefined) req.body = body;
  return body;
}

function problem(res: ServerResponse, status: number, title: string, detail: string): void {
  res.statusCode = status;
  res.setHeader("Content-Type", "application/problem+json");
  res.end(JSON.stringify({ type: "about:blank", title, status, detail }));
}

const canonical = (h: string) => h.toLowerCase().replace(/(^|-)([a-z])/g, (_, d, c) => d + c.toUpperCase());
