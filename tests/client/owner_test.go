package client_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/client"
)

// TestDefaultOwnerIsHostPid: a lease acquired without Owner shows
// HOST/PID (as the CLI's --owner default) to operators; an explicit Owner
// wins.
func TestDefaultOwnerIsHostPid(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := nodeClient(t, n)
	host, _ := os.Hostname()
	want := host + "/" + strconv.Itoa(os.Getpid())
	if got := client.DefaultOwner(); got != want {
		t.Fatalf("DefaultOwner() = %q, want %q", got, want)
	}
	mustAcquire(t, c, []string{"owner/default"}, client.TTL(time.Minute))
	if h := holderOf(t, c, "owner/default"); h.Owner != want {
		t.Fatalf("owner shown without Owner: %q, want %q", h.Owner, want)
	}
	mustAcquire(t, c, []string{"owner/explicit"}, client.TTL(time.Minute), client.Owner("billing-7"))
	if h := holderOf(t, c, "owner/explicit"); h.Owner != "billing-7" || strings.Contains(h.Owner, "/") {
		t.Fatalf("owner shown with Owner(billing-7): %q", h.Owner)
	}
}
