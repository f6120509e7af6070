package httpidem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/client"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// ReplayedHeader marks a response served from the stored result.
const ReplayedHeader = "Idempotency-Replayed"

// MaxKeyLen bounds the header's key.
const MaxKeyLen = 200

// Config configures Middleware.
type Config struct {
	Client *client.Client // required
	// Prefix is put before every key (a namespace per API, say "payments/").
	Prefix string
	// Required refuses requests without the header with 400.
	Required bool
	// Fingerprint identifies what a request asks for; default: method,
	// path and body.
	Fingerprint func(r *http.Request, body []byte) []byte
	// AttemptTTL is the attempt lease's TTL (renewed while the handler
	// runs); default 10s. Retention is how long results are kept (0: the
	// server's default).
	AttemptTTL time.Duration
	Retention  time.Duration
	// MaxBody bounds the request body read for the fingerprint (default
	// 1 MiB); a larger one gets 413.
	MaxBody int64
	// Retryable says a response should not be stored, so a retry runs the
	// handler again (default: status >= 500).
	Retryable func(status int) bool
	// Headers are the response headers stored and replayed (default
	// Content-Type, Location, Cache-Control).
	Headers []string
	Logger  *slog.Logger
}

type tokenKey struct{}

type keyKey struct{}

// Key is the request's idempotency key as parsed from the header (without
// Config.Prefix), or "" outside the middleware.
func Key(ctx context.Context) string {
	k, _ := ctx.Value(keyKey{}).(string)
	return k
}

// Token is the fencing token of the attempt the request runs under (0
// outside the middleware): write it with the effect.
func Token(ctx context.Context) uint64 {
	t, _ := ctx.Value(tokenKey{}).(uint64)
	return t
}

// TokenSource returns a Source for httpfence.Transport: the attempt's token.
func TokenSource(ctx context.Context) interface{ Token() uint64 } { return fixedToken(Token(ctx)) }

type fixedToken uint64

func (t fixedToken) Token() uint64 { return uint64(t) }

// stored is a response as kept in leasehold.
type stored struct {
	Status  int                 `json:"s"`
	Headers map[string][]string `json:"h,omitempty"`
	Body    []byte              `json:"b,omitempty"`
}

// Middleware wraps next; see the package documentation.
func Middleware(cfg Config, next http.Handler) http.Handler {
	if cfg.Fingerprint == nil {
		cfg.Fingerprint = func(r *http.Request, body []byte) []byte {
			return client.FingerprintOf([]byte(r.Method), []byte(r.URL.Path), body)
		}
	}
	if cfg.AttemptTTL == 0 {
		cfg.AttemptTTL = 10 * time.Second
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 1 << 20
	}
	if cfg.Retryable == nil {
		cfg.Retryable = func(status int) bool { return status >= 500 }
	}
	if cfg.Headers == nil {
		cfg.Headers = []string{"Content-Type", "Location", "Cache-Control"}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &middleware{cfg: cfg, next: next}
}

type middleware struct {
	cfg  Config
	next http.Handler
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw := r.Header.Values(Header)
	if len(raw) == 0 {
		if m.cfg.Required {
			problem(w, http.StatusBadRequest, "Idempotency-Key is missing",
				"This operation requires an Idempotency-Key header; send a unique key per operation and the same key on every retry of it.")
			return
		}
		m.next.ServeHTTP(w, r)
		return
	}
	key, err := parseKey(raw)
	if err != nil {
		problem(w, http.StatusBadRequest, "Idempotency-Key is malformed", err.Error())
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, m.cfg.MaxBody+1))
	if err != nil {
		problem(w, http.StatusBadRequest, "The request body could not be read", err.Error())
		return
	}
	if int64(len(body)) > m.cfg.MaxBody {
		problem(w, http.StatusRequestEntityTooLarge, "The request body is too large",
			fmt.Sprintf("An idempotent request body may be at most %d bytes.", m.cfg.MaxBody))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	ctx := r.Context()
	opts := []client.IdemOption{client.AttemptTTL(m.cfg.AttemptTTL)}
	if m.cfg.Retention > 0 {
		opts = append(opts, client.Retention(m.cfg.Retention))
	}
	a, result, err := m.cfg.Client.Begin(ctx, m.cfg.Prefix+key, m.cfg.Fingerprint(r, body), opts...)
	switch {
	case errors.Is(err, client.ErrFingerprintMismatch):
		problem(w, http.StatusUnprocessableEntity, "Idempotency-Key reused with a different request",
			"This Idempotency-Key was first used for a request with another method, path or body; use a new key for a new request.")
		return
	case errors.Is(err, client.ErrInProgress):
		problem(w, http.StatusConflict, "A request with this Idempotency-Key is in progress",
			"Another request with the same Idempotency-Key is being processed; retry later with the same key to get its result.")
		return
	case err != nil:
		m.cfg.Logger.Warn("idempotency begin failed", "key", key, "err", err)
		status, title := http.StatusServiceUnavailable, "The idempotency store is unavailable"
		if errors.Is(err, leasehold.ErrInvalid) {
			status, title = http.StatusBadRequest, "Idempotency-Key is not acceptable"
		}
		problem(w, status, title, err.Error())
		return
	case a == nil:
		m.replay(w, key, result)
		return
	}
	m.run(w, r, key, a)
}

// run serves the request under attempt a and stores its response.
func (m *middleware) run(w http.ResponseWriter, r *http.Request, key string, a *client.Attempt) {
	ctx, stop := a.Keep(context.WithValue(context.WithValue(r.Context(), tokenKey{}, a.Token()), keyKey{}, key))
	rec := &recorder{header: http.Header{}}
	m.next.ServeHTTP(rec, r.WithContext(ctx))
	stop()
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	done := context.WithoutCancel(r.Context())
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		m.cfg.Logger.Warn("idempotency attempt lost while the handler ran", "key", key, "err", cause)
		problem(w, http.StatusConflict, "The request outlived its idempotency attempt",
			"Another request with the same Idempotency-Key took over; retry with the same key to get the result.")
		return
	}
	if m.cfg.Retryable(rec.status) {
		if err := a.Abandon(done); err != nil {
			m.cfg.Logger.Warn("could not abandon an idempotency attempt; it lapses after its TTL", "key", key, "err", err)
		}
		rec.writeTo(w)
		return
	}
	s := stored{Status: rec.status, Headers: map[string][]string{}, Body: rec.body.Bytes()}
	for _, h := range m.cfg.Headers {
		if v := rec.header.Values(h); len(v) > 0 {
			s.Headers[http.CanonicalHeaderKey(h)] = v
		}
	}
	enc, _ := json.Marshal(s)
	if err := a.Complete(done, enc); err != nil {
		m.cfg.Logger.Warn("could not store the response of an idempotent request", "key", key, "err", err)
		if errors.Is(err, leasehold.ErrStaleToken) {
			problem(w, http.StatusConflict, "The request outlived its idempotency attempt",
				"Another request with the same Idempotency-Key took over; retry with the same key to get the result.")
			return
		}
	}
	rec.writeTo(w)
}

func (m *middleware) replay(w http.ResponseWriter, key string, result []byte) {
	var s stored
	if err := json.Unmarshal(result, &s); err != nil || s.Status == 0 {
		m.cfg.Logger.Error("a stored idempotent response does not decode", "key", key, "err", err)
		problem(w, http.StatusInternalServerError, "The stored response cannot be replayed", "The result stored for this key is not a response this server wrote.")
		return
	}
	for k, v := range s.Headers {
		w.Header()[k] = v
	}
	w.Header().Set(ReplayedHeader, "true")
	w.WriteHeader(s.Status)
	w.Write(s.Body)
}

// parseKey accepts the draft's sf-string ("...") and, leniently, a bare
// token.
func parseKey(values []string) (string, error) {
	if len(values) > 1 {
		return "", errors.New("send exactly one Idempotency-Key header")
	}
	v := strings.TrimSpace(values[0])
	if strings.HasPrefix(v, `"`) {
		s, err := strconv.Unquote(v)
		if err != nil || strings.ContainsAny(s, `"\`) {
			return "", errors.New(`the Idempotency-Key value must be a quoted string like "8e03978e-40d5-43e8-bc93-6894a57f9324"`)
		}
		v = s
	}
	if v == "" || len(v) > MaxKeyLen {
		return "", fmt.Errorf("the Idempotency-Key must be 1 to %d characters", MaxKeyLen)
	}
	for _, c := range v {
		if c < 0x20 || c > 0x7e {
			return "", errors.New("the Idempotency-Key must be printable ASCII")
		}
	}
	return v, nil
}

// problem writes an RFC 9457 problem details body.
func problem(w http.ResponseWriter, status int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": title, "status": status, "detail": detail})
}

// recorder keeps the handler's response, to store it before sending it.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

func (r *recorder) writeTo(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	w.WriteHeader(r.status)
	w.Write(r.body.Bytes())
}
