package httpfence_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/leasehold/leasehold/fence/httpfence"
)

func ExampleFormat() {
	v, err := httpfence.Format("batch; id=7", 4711)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v)
	f, err := httpfence.Parse(v)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q %d\n", f.Resource, f.Token)
	// Output:
	// resource=batch%3B%20id%3D7; token=4711
	// "batch; id=7" 4711
}

// A service accepts writes only from the current holder of a lease; a client
// sends its lease's token with every request.
func ExampleMiddleware() {
	// Server side. In production the store is a pgfence.Store, shared by all
	// replicas.
	store := &httpfence.MemoryStore{}
	write := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, _ := httpfence.FromContext(r.Context())
		fmt.Fprintf(w, "written with token %d", f.Token)
	})
	srv := httptest.NewServer(httpfence.Middleware(store,
		httpfence.OnReject(func(resource string, offered, current uint64) {
			// count it in the service's own metrics
		}),
	)(write))
	defer srv.Close()

	// Client side. The Source is normally the *client.Lease from leasehold.
	post := func(token uint64) {
		c := &http.Client{Transport: &httpfence.Transport{
			Resource: "reports/nightly",
			Source:   httpfence.TokenFunc(func() uint64 { return token }),
		}}
		resp, err := c.Post(srv.URL, "text/plain", nil)
		if errors.Is(err, httpfence.ErrZeroToken) {
			fmt.Println("not sent: token 0")
			return
		}
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d %s\n", resp.StatusCode, bytes.TrimSpace(body))
	}
	post(8) // the holder
	post(7) // an ex-holder, after the lease moved on
	post(0) // a degraded lease
	// Output:
	// 200 written with token 8
	// 409 {"error":"stale_token","resource":"reports/nightly","offered":7,"current":8,"message":"stale fencing token for resource \"reports/nightly\": offered 7, current 8"}
	// not sent: token 0
}
