package ui

import (
	"context"
	"net/http"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// eventRow is one watch event about a resource.
type eventRow struct {
	Index, LeaseID, Token  uint64
	Kind, Owner, Operation string
	Reason                 string
}

// Bounds of a resource's recent history: how far back in the log it looks
// (so how many events it holds), how many entries its timeline shows, how
// long it may take in all, and how long a pause ends it. A watch gives no sign that it has caught up, and its
// replay comes from memory at once, so a pause means it has.
const (
	historyEntries = 5000
	historyShown   = 50
	historyTime    = 3 * time.Second
	historyIdle    = 100 * time.Millisecond
)

// history is the recent watch events about resource (renewals too),
// oldest first, read from the node's event history: a watch from a little
// before the applied index, read until it reaches that index or pauses.
func (d *Dashboard) history(r *http.Request, s *session, resource string) []eventRow {
	st, err := d.cluster.Status(r.Context(), authed(s, &pb.StatusRequest{Local: true}))
	if err != nil || len(st.Msg.Nodes) == 0 {
		return nil
	}
	applied := st.Msg.Nodes[0].AppliedIndex
	from := max(d.oldestWatchable(), applied-min(applied, historyEntries))
	ctx, cancel := context.WithTimeout(r.Context(), historyTime)
	defer cancel()
	stream, err := d.watch.Watch(ctx, authed(s, &pb.WatchRequest{Prefixes: []string{resource}, FromIndex: &from, Renewed: true}))
	if err != nil {
		return nil
	}
	defer stream.Close()
	msgs := make(chan *pb.WatchResponse)
	go func() {
		defer close(msgs)
		for stream.Receive() {
			select {
			case msgs <- stream.Msg():
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() {
		cancel()
		for range msgs { // the receiver ends with ctx
		}
	}()
	var out []eventRow
	idle := time.NewTimer(historyIdle)
	defer idle.Stop()
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				return out
			}
			for _, e := range m.Events {
				if slices.Contains(e.Resources, resource) {
					out = append(out, eventRow{Index: e.Index, LeaseID: e.LeaseId, Token: e.Token, Kind: e.Kind,
						Owner: e.Owner, Operation: e.Operation, Reason: e.Reason})
				}
			}
			if m.Index >= applied {
				return out
			}
			idle.Reset(historyIdle)
		case <-idle.C:
			return out
		}
	}
}

// oldestWatchable is the oldest index the node's event history still
// holds (its leasehold_watch_history_oldest_index gauge; 0 if unknown).
func (d *Dashboard) oldestWatchable() uint64 {
	mfs, err := d.cfg.Metrics.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() == "leasehold_watch_history_oldest_index" {
			return uint64(gaugeSum(mf))
		}
	}
	return 0
}

func gaugeSum(mf *dto.MetricFamily) float64 {
	var v float64
	for _, m := range mf.Metric {
		v += m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	return v
}
