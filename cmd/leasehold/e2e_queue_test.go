package main_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// queueJSON runs a queue command with --json against n and decodes its
// output into v.
func (n *node) queueJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	r := n.lhOK(append(append([]string{"queue"}, args...), "--json")...)
	if err := decodeStrict(r.stdout, v); err != nil {
		t.Fatalf("queue %s --json: %v\n%s", strings.Join(args, " "), err, r.stdout)
	}
}

// The queue commands end to end: send (with a dedup id and from a file),
// receive in key order, show the key in flight, ack, refuse a stale ack,
// nack into a dead letter with its note, redrive it, purge and delete.
func TestCLIQueue(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	n.lhOK("queue", "create", "jobs", "--max-receives", "1", "--visibility", "30s")
	// -o wide adds the settings to list, and when it was sent and its size
	// to each received message; the table has neither.
	n.lhOK("queue", "create", "wide", "--dead-letter", "block")
	n.lhOK("queue", "send", "wide", "--key", "k", "--body", "12345")
	if r := n.lhOK("queue", "list", "-o", "wide"); !strings.Contains(r.stdout, "MAX RECEIVES") || !strings.Contains(r.stdout, "block") {
		t.Fatalf("queue list -o wide: want the settings' columns\n%s", r)
	}
	if r := n.lhOK("queue", "list"); strings.Contains(r.stdout, "MAX RECEIVES") {
		t.Fatalf("queue list: want no wide columns\n%s", r)
	}
	if r := n.lhOK("queue", "receive", "wide", "-o", "wide"); !strings.Contains(r.stdout, "SENT") || !regexp.MustCompile(`"12345"\s+\S+ \S+\s+5\n`).MatchString(r.stdout) {
		t.Fatalf("queue receive -o wide: want the body, its sent time and its 5 bytes\n%s", r)
	}

	var sent cliout.Sent
	n.queueJSON(t, &sent, "send", "jobs", "--key", "a", "--body", "first", "--dedup-id", "a-1")
	first := sent.Sequence
	n.queueJSON(t, &sent, "send", "jobs", "--key", "a", "--body", "first again", "--dedup-id", "a-1")
	if !sent.Duplicate || sent.Sequence != first {
		t.Fatalf("a resend with the same dedup id: %+v, want a duplicate of sequence %d", sent, first)
	}
	file := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(file, []byte("second"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.lhOK("queue", "send", "jobs", "--key", "a", "--file", file)
	if r := n.lh("queue", "send", "jobs", "--key", "a"); r.code == 0 || !strings.Contains(r.stderr, "exactly one of --body and --file") {
		t.Fatalf("a send without a body: %s", r)
	}

	var got cliout.Received
	n.queueJSON(t, &got, "receive", "jobs", "--max", "10")
	if len(got.Deliveries) != 1 || *got.Deliveries[0].Body != "first" || got.Deliveries[0].Sequence != first ||
		got.Deliveries[0].Token == 0 || !strings.HasSuffix(got.Deliveries[0].SentAt, "Z") ||
		!strings.HasSuffix(got.Deliveries[0].SafeDeadline, "Z") {
		t.Fatalf("receive: %+v, want only key a's first message (one per key in flight)", got.Deliveries)
	}
	d := got.Deliveries[0]

	var show cliout.Queue
	n.queueJSON(t, &show, "show", "jobs")
	if show.Depth != 2 || show.InFlight != 1 || len(show.InFlightKeys) != 1 || show.InFlightKeys[0].Key != "a" ||
		show.InFlightKeys[0].Token != d.Token {
		t.Fatalf("show: %+v", show)
	}

	ack := []string{"queue", "ack", "jobs", "--sequence", fmt.Sprint(d.Sequence), "--token", fmt.Sprint(d.Token)}
	n.lhOK(ack...)
	if r := n.lh(ack...); r.code == 0 || !strings.Contains(r.stderr, "no longer in flight") {
		t.Fatalf("a second ack of the same delivery: %s", r)
	}

	n.queueJSON(t, &got, "receive", "jobs")
	if len(got.Deliveries) != 1 || *got.Deliveries[0].Body != "second" {
		t.Fatalf("receive after the ack: %+v, want key a's second message", got.Deliveries)
	}
	d = got.Deliveries[0]
	// --delivery, --sequence's old name, still works.
	n.lhOK("queue", "nack", "jobs", "--delivery", fmt.Sprint(d.Sequence), "--token", fmt.Sprint(d.Token), "--error", "disk full")
	var dead cliout.DeadLetters
	n.queueJSON(t, &dead, "dead-letters", "jobs")
	if len(dead.DeadLetters) != 1 || dead.DeadLetters[0].Note != "disk full" {
		t.Fatalf("dead letters after a nack past max receives: %+v", dead.DeadLetters)
	}
	if r := n.lhOK("queue", "redrive", "jobs"); !strings.Contains(r.stdout, "moved 1") {
		t.Fatalf("redrive: %s", r)
	}
	if r := n.lhOK("queue", "purge", "jobs", "--reason", "test", "--yes"); !strings.Contains(r.stdout, "dropped 1") {
		t.Fatalf("purge: %s", r)
	}
	if r := n.lh("queue", "delete", "jobs", "--yes"); r.code == 0 || !strings.Contains(r.stderr, "--reason is required") {
		t.Fatalf("delete without a reason: %s", r)
	}
	n.lhOK("queue", "delete", "jobs", "--reason", "test", "--yes")
	if r := n.lh("queue", "show", "jobs"); r.code == 0 || !strings.Contains(r.stderr, "does not exist") {
		t.Fatalf("show after delete: %s", r)
	}
}

// serve --max-queue-body-bytes bounds a message's body: a node started
// with 1024 takes a 1024-byte body and refuses a 1025-byte one as invalid
// (exit 2), naming the limit; a value over 1 MiB is refused at start.
func TestServeMaxQueueBodyBytes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := lhEnv(t, childEnv(), "serve", "--data-dir", filepath.Join(dir, "data"), "--api-addr", freeAddr(t),
		"--raft-addr", freeAddr(t), "--max-queue-body-bytes", "2097152")
	if r.code != 2 || !strings.Contains(r.stderr, "--max-queue-body-bytes 2097152: give 1 to 1048576") {
		t.Fatalf("serve --max-queue-body-bytes 2097152: want exit 2 naming the flag and its range\n%s", r)
	}

	n := newNode(t)
	n.args = []string{"--max-queue-body-bytes", "1024"}
	n.start()
	n.lhOK("queue", "create", "small")
	n.lhOK("queue", "send", "small", "--key", "k", "--body", strings.Repeat("x", 1024))
	r = n.lh("queue", "send", "small", "--key", "k", "--body", strings.Repeat("x", 1025))
	if r.code != 2 || !strings.Contains(r.stderr, "1025 bytes; the limit is 1024") {
		t.Fatalf("a 1025-byte body on a node with --max-queue-body-bytes 1024: want exit 2 naming the limit\n%s", r)
	}
}
