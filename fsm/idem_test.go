package fsm

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/api/leasehold"
)

func idemBegin(key, fp, sec string) *IdemBegin {
	return &IdemBegin{Key: key, Fingerprint: secret(fp), Owner: "api", TTL: 10 * time.Second, SecretHash: secret(sec)}
}

// Over a limit, Begin and Complete are refused with resource_exhausted
// naming the limit, and nothing changes.
func TestIdemLimits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxIdemKeysPerPrefix, cfg.MaxIdemBytes, cfg.MaxIdemResult = 2, 10, 8
	s := New(cfg, nil)
	ix := uint64(0)
	apply := func(c Command) Result {
		ix++
		return s.Apply(ix, &Batch{Time: t0 + int64(ix), Cmds: []Command{c}})[0]
	}
	a := apply(idemBegin("pay/1", "x", "a"))
	apply(idemBegin("pay/2", "x", "b"))
	if r := apply(idemBegin("pay/3", "x", "c")); leasehold.CodeOf(r.Err) != leasehold.CodeLimit ||
		!strings.Contains(r.Err.Error(), "max_idem_keys_per_prefix") {
		t.Fatalf("third key under pay/: %v", r.Err)
	}
	if r := apply(idemBegin("other/1", "x", "d")); r.Err != nil {
		t.Fatalf("another prefix: %v", r.Err)
	}
	if r := apply(&IdemComplete{Key: "pay/1", LeaseID: a.Idem().Token, SecretHash: secret("a"), Result: []byte("123456789")}); leasehold.CodeOf(r.Err) != leasehold.CodeInvalid ||
		!strings.Contains(r.Err.Error(), "max_idem_result") {
		t.Fatalf("a 9-byte result over max_idem_result 8: %v", r.Err)
	}
	if r := apply(&IdemComplete{Key: "pay/1", LeaseID: a.Idem().Token, SecretHash: secret("a"), Result: []byte("12345678")}); r.Err != nil {
		t.Fatal(r.Err)
	}
	b, _ := s.IdemGet("pay/2")
	if r := apply(&IdemComplete{Key: "pay/2", LeaseID: b.Token, SecretHash: secret("b"), Result: []byte("123")}); leasehold.CodeOf(r.Err) != leasehold.CodeLimit ||
		!strings.Contains(r.Err.Error(), "max_idem_bytes") {
		t.Fatalf("results over max_idem_bytes: %v", r.Err)
	}
	if got, _ := s.IdemGet("pay/2"); got.State != IdemInProgress {
		t.Fatalf("a refused Complete changed the key: %+v", got)
	}
	// Retention is bounded by the configured maximum.
	c := idemBegin("other/2", "x", "e")
	c.Retention = cfg.MaxIdemRetention + time.Hour
	if r := apply(c); leasehold.CodeOf(r.Err) != leasehold.CodeInvalid || !strings.Contains(r.Err.Error(), "retention") {
		t.Fatalf("retention over the maximum: %v", r.Err)
	}
}

// A retried Begin with the attempt's own secret gets the attempt again,
// and a retried Complete gets the completed record: a lost reply never
// costs the caller its attempt or its answer.
func TestIdemRetriesAreAnsweredAgain(t *testing.T) {
	s := New(DefaultConfig(), nil)
	r := s.Apply(1, &Batch{Time: t0, Cmds: []Command{idemBegin("k", "x", "a")}})[0]
	again := s.Apply(2, &Batch{Time: t0 + 1, Cmds: []Command{idemBegin("k", "x", "a")}})[0]
	if again.Err != nil || again.Idem().State != IdemStarted || again.Lease == nil || again.Lease.ID != r.Lease.ID {
		t.Fatalf("retried begin: %+v %v", again.Idem(), again.Err)
	}
	done := &IdemComplete{Key: "k", LeaseID: r.Lease.ID, SecretHash: secret("a"), Result: []byte("ok")}
	s.Apply(3, &Batch{Time: t0 + 2, Cmds: []Command{done}})
	retry := s.Apply(4, &Batch{Time: t0 + 3, Cmds: []Command{done}})[0]
	if retry.Err != nil || retry.Idem().State != IdemCompleted || string(retry.Idem().Result) != "ok" {
		t.Fatalf("retried complete: %+v %v", retry.Idem(), retry.Err)
	}
	forged := &IdemComplete{Key: "k", LeaseID: r.Lease.ID, SecretHash: secret("mallory"), Result: []byte("x")}
	if r := s.Apply(5, &Batch{Time: t0 + 4, Cmds: []Command{forged}})[0]; r.Err == nil {
		t.Fatal("a complete with another secret was answered as a retry")
	}
}
