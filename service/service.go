// Package service is what a node does for each primitive, behind typed
// methods: the lease protocol (acquire with its waiting and withdrawal,
// renew, release, reads of holders and lists) and the KV reads. Package
// server is its thin API front: it authorizes, converts, calls and
// converts back. The next primitives live here beside the leases, in the
// same shape.
package service

import (
	"context"
	"log/slog"

	"github.com/leasehold/leasehold/cluster"
)

// Service runs one node's primitives.
type Service struct {
	node *cluster.Node
	log  *slog.Logger
	// stopping ends when the node's API shuts down: callers who leave then
	// are told to retry elsewhere, and their attempts are left to the
	// leader's wait timer instead of being withdrawn.
	stopping context.Context
	// places are the places in line Batch answered "queued", held for
	// their caller's follow-up.
	places *places
	// hub is the node's event history, which watches read.
	hub *Hub
}

// New returns the service of node. stopping ends when the API shuts down.
// hub is the node's event history (the cluster.History node was opened
// with); nil gives a hub that hears nothing, whose watchers wait forever.
func New(node *cluster.Node, hub *Hub, log *slog.Logger, stopping context.Context) *Service {
	if log == nil {
		log = slog.Default()
	}
	if hub == nil {
		hub = NewHub(HubConfig{})
	}
	return &Service{node: node, log: log, stopping: stopping, places: newPlaces(), hub: hub}
}
