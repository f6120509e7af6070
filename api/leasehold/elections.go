package leasehold

import "time"

// The vocabulary of elections: leadership is a lease on the election's
// name, so a campaign takes the lease limits (leases.go) and these.

// MaxElectionValue bounds a leader's value.
const MaxElectionValue = 4 << 10

// Election is what anyone may see of an election.
type Election struct {
	Name       string
	LeaseID    uint64 // the leader's lease (0: no leader now)
	Token      uint64 // the term's fencing token
	Value      []byte
	Owner      string
	Since      time.Time // the leader's grant, leader's wall clock (display only)
	Candidates int       // campaigns waiting
}
