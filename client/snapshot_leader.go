package client

import (
	"context"
	"strings"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// snapshotSource is the admin client Snapshot streams from: the leader's,
// which has the newest state, found by asking the configured nodes; the
// node in use when no leader answers (a node without quorum can still be
// saved, as the runbook's last resort).
func (c *Client) snapshotSource(ctx context.Context) leaseholdv1connect.AdminClient {
	cur := &c.nodes[int(c.cur.Load())%len(c.nodes)]
	url := c.leaderURL(ctx)
	if url == "" || url == cur.url {
		return cur.admin
	}
	for i := range c.nodes {
		if c.nodes[i].url == url {
			return c.nodes[i].admin
		}
	}
	// The leader is not among the endpoints (the caller named one
	// follower): dial it. Snapshot sets the token on the stream itself.
	return leaseholdv1connect.NewAdminClient(c.cfg.HTTPClient, url)
}

// leaderURL asks the configured nodes, in turn, for the leader's API URL:
// the Leasehold-Leader mark of an answer the leader gave, directly or
// through a follower that forwarded the request (an audit read of one
// record, which a follower forwards). "" if no node names one in time.
func (c *Client) leaderURL(ctx context.Context) string {
	for i := range c.nodes {
		e := &c.nodes[(int(c.cur.Load())+i)%len(c.nodes)]
		actx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		res, err := e.admin.Audit(actx, connect.NewRequest(&pb.AuditRequest{Limit: 1}))
		cancel()
		if err == nil {
			if url := strings.TrimRight(res.Header().Get(leaderHeader), "/"); url != "" {
				return url
			}
		}
	}
	return ""
}
