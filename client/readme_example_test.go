package client_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// writeChunk stands for the protected work: a write that the resource
// accepts only with a current fencing token.
func writeChunk(ctx context.Context, chunk []byte, token uint64) error { return ctx.Err() }

// nightlyReport is docs/go-client.md's Go snippet (between the markers),
// compiled here so that it stays true; TestREADMEGoSnippetIsCompiled
// checks that the page shows exactly this.
func nightlyReport(ctx context.Context, chunks [][]byte) (err error) {
	// README snippet begins
	c, err := client.New(client.Config{Endpoints: []string{"http://127.0.0.1:7420"}})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.Close()) }() // runs last: Close gives back leases still held
	lease, err := c.Acquire(ctx, "reports/nightly", client.TTL(15*time.Second),
		client.Wait(time.Minute), client.Operation("nightly-report"))
	if err != nil {
		return err // leasehold.ErrWaitTimeout: still held after a minute
	}
	defer func() {
		// Release even if ctx has ended. An error wrapping client.ErrLeaseLost
		// means the server had ended the lease: work ran without it.
		err = errors.Join(err, lease.Release(context.WithoutCancel(ctx)))
	}()
	wctx := lease.Context(ctx) // ends the moment the lease is lost
	for i, chunk := range chunks {
		if err := writeChunk(wctx, chunk, lease.Token()); err != nil {
			return fmt.Errorf("chunk %d: %w", i, err) // context.Cause(wctx): why wctx ended
		}
		// Report progress during the work: renewal goes on only while the
		// holder reports progress within the TTL, so a job longer than
		// the TTL keeps its lease chunk by chunk.
		lease.Progress(fmt.Sprintf("chunk %d of %d written", i+1, len(chunks)))
	}
	return nil
	// README snippet ends
}

func ExampleLease_Progress_chunks() {
	if err := nightlyReport(context.Background(), [][]byte{[]byte("a"), []byte("b")}); err != nil {
		fmt.Println(err)
	}
}

// TestREADMEGoSnippetIsCompiled: the first Go block of docs/go-client.md
// (once the README's "Go client" section) is nightlyReport's body, so the
// snippet compiles and checks every error.
func TestREADMEGoSnippetIsCompiled(t *testing.T) {
	readme, err := os.ReadFile("../docs/go-client.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("readme_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "# Go client\n")
	_, block, ok2 := strings.Cut(section, "```go\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("docs/go-client.md has no Go block under # Go client")
	}
	_, body, _ := strings.Cut(string(src), "// README snippet begins\n")
	body, _, _ = strings.Cut(body, "\t// README snippet ends")
	if norm(block) != norm(body) {
		t.Errorf("docs/go-client.md's Go snippet differs from nightlyReport in client/readme_example_test.go:\ndocs/go-client.md:\n%s\nnightlyReport:\n%s", block, body)
	}
}

// norm drops indentation, which differs (a tab in Go, spaces in the README).
func norm(s string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		out = append(out, strings.TrimSpace(l))
	}
	return strings.Join(out, "\n")
}
