// Package service is what a node does for each primitive, behind typed
// requests and results (api.go): the lease protocol (acquire with its
// waiting and withdrawal, renew, release, reads of holders and lists),
// semaphores, the fenced KV space, elections, idempotency keys, keyed
// queues, partition groups, watches, the operators' calls and the
// cluster's membership. A method reads its caller from its context
// (WithCaller), builds the state machine's commands, proposes them, waits
// and reads. Package server is its thin API front: it authorizes,
// validates, converts, calls and converts back, and imports neither fsm
// nor cluster.
package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"

	"github.com/leasehold/leasehold/cluster"
)

// Service runs one node's primitives.
type Service struct {
	node *cluster.Node
	log  *slog.Logger
	// stopping ends when the node's API shuts down (Stop): callers who
	// leave then are told to retry elsewhere, and their attempts are left
	// to the leader's wait timer instead of being withdrawn.
	stopping context.Context
	stop     context.CancelFunc
	// places are the places in line Batch answered "queued", held for
	// their caller's follow-up.
	places *places
	// hub is the node's event history, which watches read.
	hub *Hub
}

// New returns the service of node. hub is the node's event history (the
// cluster.History node was opened with); nil gives a hub that hears
// nothing, whose watchers wait forever.
func New(node *cluster.Node, hub *Hub, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	if hub == nil {
		hub = NewHub(HubConfig{})
	}
	stopping, stop := context.WithCancel(context.Background())
	return &Service{node: node, log: log, stopping: stopping, stop: stop, places: newPlaces(), hub: hub}
}

// Stop says the node's API is shutting down (the API front calls it when
// it cuts the requests still in flight): a caller that leaves from now on
// is told to retry elsewhere, with its place in line kept for the leader's
// wait timer to end. It is idempotent.
func (s *Service) Stop() { s.stop() }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
