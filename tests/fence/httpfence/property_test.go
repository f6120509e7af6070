package httpfence_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"

	"github.com/leasehold/leasehold/fence/httpfence"
	"github.com/leasehold/leasehold/fence/pgfence"
	"github.com/leasehold/leasehold/internal/pgtest"
)

func TestMiddlewarePropertyMemory(t *testing.T) {
	checkMiddleware(t, &httpfence.MemoryStore{}, math.MaxUint64)
}

func TestMiddlewarePropertyPostgres(t *testing.T) {
	dsn := pg().NewDatabase(t)
	ctx := testCtx(t, 10*time.Second)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := pgfence.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	// Requests are served on several goroutines: the store needs a pool.
	checkMiddleware(t, pgfence.NewStore(pgtest.NewPool(t, dsn, 4), nil), pgfence.MaxToken)
}

// A writer is a client holding a lease on one resource; its token changes as
// it loses and regains leases, or as the test pleases.
type writer struct {
	resource string
	token    atomic.Uint64
	client   *http.Client
}

// checkMiddleware: for random interleavings of writers with random tokens,
// sent through Transport to the middleware over a loopback httptest server,
// exactly the requests whose token is >= every token accepted before for
// their resource reach the handler, in that order; the others get 409 with
// the mark that refused them. maxToken is the largest token the store holds.
func checkMiddleware(t *testing.T, store httpfence.Store, maxToken uint64) {
	var (
		mu      sync.Mutex
		handled []httpfence.Fence
	)
	ts := httptest.NewServer(httpfence.Middleware(store)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _ := httpfence.FromContext(r.Context())
		mu.Lock()
		handled = append(handled, f)
		mu.Unlock()
	})))
	defer ts.Close()
	base := ts.Client().Transport

	iteration := 0
	rapid.Check(t, func(rt *rapid.T) {
		iteration++
		// Fresh names per iteration keep iterations apart in one store.
		names := []string{
			fmt.Sprintf("it%d/a", iteration),
			fmt.Sprintf("it%d/b c;d=e%%", iteration),
		}
		writers := make([]*writer, rapid.IntRange(1, 4).Draw(rt, "writers"))
		for i := range writers {
			w := &writer{resource: names[rapid.IntRange(0, len(names)-1).Draw(rt, "resource")]}
			w.client = &http.Client{Transport: &httpfence.Transport{
				Base: base, Resource: w.resource, Source: httpfence.TokenFunc(w.token.Load),
				AllowZeroToken: true, // 0 obeys the rule like any token
			}}
			writers[i] = w
		}
		tokenGen := rapid.OneOf(rapid.Uint64Range(0, 12), rapid.Uint64Range(maxToken-2, maxToken))
		steps := rapid.IntRange(1, 20).Draw(rt, "steps")

		mark := map[string]uint64{}
		var want []httpfence.Fence
		mu.Lock()
		handled = handled[:0]
		mu.Unlock()

		for i := range steps {
			w := writers[rapid.IntRange(0, len(writers)-1).Draw(rt, "writer")]
			if rapid.Bool().Draw(rt, "new token") {
				w.token.Store(tokenGen.Draw(rt, "token"))
			}
			tok := w.token.Load()
			m, has := mark[w.resource]
			accept := !has || tok >= m

			r := do(rt, w.client, must(http.NewRequestWithContext(rt.Context(), "POST", ts.URL, nil)))
			if accept {
				if r.status != http.StatusOK {
					rt.Fatalf("step %d: %s token %d, mark %d (set %v): status %d %s", i, w.resource, tok, m, has, r.status, r.body)
				}
				mark[w.resource] = tok
				want = append(want, httpfence.Fence{Resource: w.resource, Token: tok})
				continue
			}
			var body httpfence.ErrorBody
			if err := json.Unmarshal(r.body, &body); err != nil {
				rt.Fatal(err)
			}
			if r.status != http.StatusConflict || body.Error != "stale_token" ||
				body.Resource != w.resource || body.Offered != tok || body.Current != m {
				rt.Fatalf("step %d: %s token %d, mark %d: got %d %s", i, w.resource, tok, m, r.status, r.body)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(handled, want) {
			rt.Fatalf("handler saw %v, want %v", handled, want)
		}
	})
}
