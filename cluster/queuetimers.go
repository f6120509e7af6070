package cluster

import (
	"time"

	"github.com/leasehold/leasehold/fsm"
)

// retireEvery is how often the leader proposes a QueueRetire for each
// queue holding messages past its retention or dedup ids past its
// window (which a send also drops). Retention is minutes to days, so a
// minute late is nothing. It is one more countdown (timers.go).
const retireEvery = time.Minute

// retirements lists a QueueRetire for each queue with a message sent
// before now less the queue's retention (or with dead letters, whose
// send times the counts do not show), or with dedup ids past its window.
func (m *machine) retirements(now time.Time) []fsm.Command {
	var out []fsm.Command
	m.read(func(st *fsm.State) {
		for _, name := range st.Queues() {
			q, _ := st.Queue(name)
			before := now.Add(-q.Settings.Retention)
			dedupDue := q.DedupIDs > 0 && !q.OldestDedupAt.After(now.Add(-q.Settings.DedupWindow))
			if q.Dead > 0 || dedupDue || (!q.OldestAt.IsZero() && q.OldestAt.Before(before)) {
				out = append(out, &fsm.QueueRetire{Queue: name, Before: before.UnixNano()})
			}
		}
	})
	return out
}

// The fsm.QueueObserver side of the machine: called inside Apply.

func (m *machine) QueueReady(queue string) { m.bell.ring(queue) }

func (m *machine) QueueDeadLettered(queue string, _ uint64) {
	if s, ok := m.events.(QueueEvents); ok {
		s.QueueDeadLettered(queue)
	}
}

// QueueEvents is what the node's event sink (Config.Events) may also
// implement to count queue events applied on this node.
type QueueEvents interface {
	QueueDeadLettered(queue string)
}
