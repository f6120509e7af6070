package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
	hist "github.com/leasehold/leasehold/internal/history"
)

// caller is one bearer token's view of the API, raw enough to choose
// request ids and secrets.
type caller struct {
	name   string
	token  string
	leases leaseholdv1connect.LeasesClient
	kv     leaseholdv1connect.KVClient
}

func newCaller(url, name, token string) caller {
	hc := &http.Client{Timeout: 30 * time.Second}
	opt := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if token != "" {
				req.Header().Set("Authorization", "Bearer "+token)
			}
			return next(ctx, req)
		}
	}))
	return caller{name: name, token: token, leases: leaseholdv1connect.NewLeasesClient(hc, url, opt),
		kv: leaseholdv1connect.NewKVClient(hc, url, opt)}
}

func (c caller) acquire(ctx context.Context, resource, requestID, secret string, wait time.Duration) (*pb.AcquireResponse, error) {
	req := &pb.AcquireRequest{Resources: []string{resource}, Ttl: durationpb.New(30 * time.Second),
		Owner: c.name, RequestId: requestID, Secret: secret}
	if wait > 0 {
		req.Wait = durationpb.New(wait)
	}
	r, err := c.leases.Acquire(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	return r.Msg, nil
}

func (c caller) put(ctx context.Context, key, value, requestID string) (*pb.PutResponse, error) {
	r, err := c.kv.Put(ctx, connect.NewRequest(&pb.PutRequest{Key: key, Value: []byte(value), RequestId: requestID}))
	if err != nil {
		return nil, err
	}
	return r.Msg, nil
}

// makeToken runs `leasehold auth token` and returns the token and its
// auth-file entry.
func makeToken(t testing.TB, name, role string, prefixes ...string) (string, json.RawMessage) {
	t.Helper()
	args := []string{"auth", "token", name, "--role", role}
	for _, p := range prefixes {
		args = append(args, "--prefix", p)
	}
	out, err := runLH(30*time.Second, args...)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "token ") {
		t.Fatalf("leasehold auth token: unexpected output:\n%s", out)
	}
	tok := strings.TrimSpace(lines[0][strings.LastIndex(lines[0], ":")+1:])
	return tok, json.RawMessage(lines[len(lines)-1])
}

// TestRequestIDCollision runs a node with auth on and two workers, alice
// and bob, each with a prefix of its own. Bob sends alice's request ids
// (a bug, a replay, or on purpose): he must neither get her lease, nor end
// her wait, nor be answered with her write's result while his write is
// dropped. Plain authorization (other prefixes, no token, a wrong secret)
// is checked alongside.
func TestRequestIDCollision(t *testing.T) {
	const scenario = "requestid-collision"
	aliceTok, aliceEntry := makeToken(t, "alice", "worker", "alice/")
	bobTok, bobEntry := makeToken(t, "bob", "worker", "bob/")
	refTok, refEntry := makeToken(t, "referee", "admin")
	authFile := filepath.Join(t.TempDir(), "auth.json")
	b, _ := json.Marshal(map[string]any{"tokens": []json.RawMessage{aliceEntry, bobEntry, refEntry}})
	if err := os.WriteFile(authFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	n := newNode(t, "n1", "", "--auth-file", authFile)
	h := &history{}
	err := n.start()
	if err == nil {
		err = collide(t, n, h, newCaller(n.url, "alice", aliceTok), newCaller(n.url, "bob", bobTok),
			newCaller(n.url, "referee", refTok), newCaller(n.url, "anonymous", ""))
	}
	finish(t, scenario, h, newClient(t, refTok, n.url), expect{}, err)
}

func collide(t *testing.T, n *node, h *history, alice, bob, referee, anonymous caller) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for round := range rounds(1, 5) {
		id := func(what string) string { return fmt.Sprintf("collide-%d-%s", round, what) }
		res := func(who, what string) string { return fmt.Sprintf("%s/r%d-%s", who, round, what) }

		// 1. Alice's granted acquire; bob sends its request id.
		a, err := alice.acquire(ctx, res("alice", "held"), id("acquire"), newSecret(), 0)
		if err != nil {
			return fmt.Errorf("alice's acquire: %w", err)
		}
		h.granted(res("alice", "held"), a.Lease.Id, a.Lease.Token)
		bA, err := bob.acquire(ctx, res("bob", "held"), id("acquire"), "", 0)
		if err == nil {
			if bA.Lease.Id == a.Lease.Id || !equalResources(bA.Lease.Resources, res("bob", "held")) {
				h.accepted("bob's acquire of %s with alice's request id was answered with alice's lease %d on %v",
					res("bob", "held"), bA.Lease.Id, bA.Lease.Resources)
			} else {
				h.granted(res("bob", "held"), bA.Lease.Id, bA.Lease.Token)
			}
		}

		// 2. Alice waits for a resource she holds already; bob sends that
		// waiting acquire's request id and walks away.
		waitRes := res("alice", "waited")
		firstSecret := newSecret()
		w0, err := alice.acquire(ctx, waitRes, id("first"), firstSecret, 0)
		if err != nil {
			return fmt.Errorf("alice's first acquire of %s: %w", waitRes, err)
		}
		h.granted(waitRes, w0.Lease.Id, w0.Lease.Token)
		type answer struct {
			r   *pb.AcquireResponse
			err error
		}
		waited := make(chan answer, 1)
		go func() {
			r, err := alice.acquire(ctx, waitRes, id("wait"), newSecret(), time.Minute)
			waited <- answer{r, err}
		}()
		if err := checkFor(progressTimeout, func() error {
			g, err := referee.leases.Get(ctx, connect.NewRequest(&pb.GetRequest{Resource: waitRes}))
			if err != nil {
				return err
			}
			if len(g.Msg.Waiters) == 0 {
				return fmt.Errorf("alice's waiter on %s is not queued yet", waitRes)
			}
			return nil
		}); err != nil {
			return err
		}
		bctx, bcancel := context.WithTimeout(ctx, time.Second)
		bW, err := bob.acquire(bctx, res("bob", "waited"), id("wait"), "", time.Minute)
		bcancel()
		if err == nil && (bW.Lease.Id != 0 && !equalResources(bW.Lease.Resources, res("bob", "waited"))) {
			h.accepted("bob's acquire with alice's waiting request id was answered with lease %d on %v", bW.Lease.Id, bW.Lease.Resources)
		}
		// The resource is still held, so nothing but a withdrawal can end
		// alice's wait now: give the server's withdrawal of a departed
		// caller (2s after it leaves) time to strike.
		ended := false
		select {
		case got := <-waited:
			ended = true
			h.accepted("bob's departure with alice's request id ended alice's wait for %s: %v", waitRes, got.err)
		case <-time.After(4 * time.Second):
		}
		if _, err := alice.leases.Release(ctx, connect.NewRequest(&pb.ReleaseRequest{LeaseId: w0.Lease.Id,
			Secret: firstSecret, RequestId: id("release-first")})); err != nil {
			return fmt.Errorf("alice's release of %s: %w", waitRes, err)
		}
		if !ended {
			select {
			case got := <-waited:
				if got.err != nil {
					return fmt.Errorf("alice's wait for %s after its release: %w", waitRes, got.err)
				}
				h.granted(waitRes, got.r.Lease.Id, got.r.Lease.Token)
			case <-time.After(progressTimeout):
				return fmt.Errorf("alice's wait for %s was not answered within %v of its release", waitRes, progressTimeout)
			}
		}

		// 3. Alice's write; bob sends its request id with a write of his own.
		aKey, bKey := res("alice", "key"), res("bob", "key")
		ap, err := alice.put(ctx, aKey, "alice's value", id("put"))
		if err != nil {
			return fmt.Errorf("alice's put: %w", err)
		}
		h.wrote(hist.Write{Key: aKey, Value: []byte("alice's value"), Version: ap.Version})
		if bp, err := bob.put(ctx, bKey, "bob's value", id("put")); err == nil {
			h.wrote(hist.Write{Key: bKey, Value: []byte("bob's value"), Version: bp.Version}) // lost if he got her answer
		}

		// 4. Plain authorization: each of these must be refused.
		if _, err := bob.acquire(ctx, res("alice", "other"), id("bob-on-alice"), "", 0); err == nil {
			h.accepted("bob acquired %s outside his prefix", res("alice", "other"))
		}
		if _, err := anonymous.acquire(ctx, res("alice", "anon"), id("anonymous"), "", 0); err == nil {
			h.accepted("an acquire without a token was granted")
		}
		if _, err := bob.put(ctx, res("alice", "bobs-key"), "bob was here", id("bob-put-alice")); err == nil {
			h.accepted("bob wrote %s outside his prefix", res("alice", "bobs-key"))
		}
		if _, err := bob.leases.Release(ctx, connect.NewRequest(&pb.ReleaseRequest{LeaseId: a.Lease.Id,
			Secret: newSecret(), RequestId: id("bob-release")})); err == nil {
			h.accepted("bob released alice's lease %d with a wrong secret", a.Lease.Id)
		}
		// Alice still holds her first lease.
		g, err := referee.leases.Get(ctx, connect.NewRequest(&pb.GetRequest{Resource: res("alice", "held")}))
		if err != nil {
			return err
		}
		if g.Msg.Holder == nil || g.Msg.Holder.Id != a.Lease.Id {
			h.accepted("alice's lease %d on %s was ended by someone else (holder now %v)", a.Lease.Id, res("alice", "held"), g.Msg.Holder)
		}
	}
	return nil
}

func equalResources(got []string, want string) bool {
	return len(got) == 1 && got[0] == want
}

// newSecret is a lease secret as the Go client makes them: 16 random
// bytes in hex.
func newSecret() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}
