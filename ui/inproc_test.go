package ui

import (
	"io"
	"net/http"
	"testing"
)

// An API handler that panics, even mid-answer, fails its call with an
// error; the node goes on.
func TestInProcessCallSurvivesAPanic(t *testing.T) {
	for _, p := range []any{"boom", http.ErrAbortHandler} {
		c := inProcess{api: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("half an answer"))
			panic(p)
		})}
		req, _ := http.NewRequest("POST", "http://node.in-process/x", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatalf("panic %v: the body %q ended cleanly, as if the answer were whole", p, b)
		}
	}
}
