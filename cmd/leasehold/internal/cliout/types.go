package cliout

import "encoding/json"

// The --json structures, one per thing shown. Comments name the commands
// that print each; docs/cli-json.md is the reference for people.

// Lease is a held lease as anyone may see it (never its secret): list,
// status (holder), locks (holder).
type Lease struct {
	LeaseID    uint64            `json:"lease_id"`
	Token      uint64            `json:"token"`
	Resources  []string          `json:"resources"`
	Owner      string            `json:"owner,omitempty"`
	Operation  string            `json:"operation,omitempty"`
	TTL        string            `json:"ttl,omitempty"`
	LockDelay  string            `json:"lock_delay,omitempty"`
	MaxHold    string            `json:"max_hold,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	AcquiredAt string            `json:"acquired_at,omitempty"` // leader's wall clock
	RenewedAt  string            `json:"renewed_at,omitempty"`  // leader's wall clock
	RenewCount uint64            `json:"renew_count"`
	Progress   string            `json:"progress,omitempty"`
	ProgressAt string            `json:"progress_at,omitempty"` // leader's wall clock
	// Semaphore and Limit are set for a semaphore's holder: the semaphore's
	// name (its one resource is the slot) and how many may hold it.
	Semaphore string `json:"semaphore,omitempty"`
	Limit     int    `json:"limit,omitempty"`
	// ExpiresIn is the server's countdown (the leader's monotonic clock),
	// left out when the answering node does not know it.
	ExpiresIn string `json:"expires_in,omitempty"`
}

// Leases is list's output.
type Leases struct {
	Leases []Lease `json:"leases"`
}

// Acquired is acquire's output: the lease and the two expiries. ExpiresIn
// is the server's countdown, which starts when the leader grants the lease;
// SafeDeadline is the client's own deadline, taken from its monotonic clock
// started before the request was sent, minus a drift allowance, so it is
// never later than the server's expiry. Stop work by SafeDeadline.
type Acquired struct {
	LeaseID      uint64   `json:"lease_id"`
	Secret       string   `json:"secret"`
	Token        uint64   `json:"token"`
	Resources    []string `json:"resources"`
	Slot         string   `json:"slot,omitempty"`  // a semaphore's: the slot held, the name to fence
	Limit        int      `json:"limit,omitempty"` // a semaphore's limit
	TTL          string   `json:"ttl"`
	ExpiresIn    string   `json:"expires_in"`
	SafeDeadline string   `json:"safe_deadline"`
	SafeFor      string   `json:"safe_for"`
}

// Released is release's output.
type Released struct {
	LeaseID  uint64 `json:"lease_id"`
	Released bool   `json:"released"`
}

// Renewed is renew's output, one per renewal with --keep-alive: the
// server's new countdown and the client's own safe deadline (as in
// Acquired).
type Renewed struct {
	LeaseID      uint64 `json:"lease_id"`
	ExpiresIn    string `json:"expires_in"`
	SafeDeadline string `json:"safe_deadline"`
	Progress     string `json:"progress,omitempty"`
}

// Waiter is a queued acquire: status.
type Waiter struct {
	Resources []string `json:"resources"`
	Owner     string   `json:"owner,omitempty"`
	Operation string   `json:"operation,omitempty"`
	Wait      string   `json:"wait,omitempty"`      // how long it is willing to wait in all
	QueuedAt  string   `json:"queued_at,omitempty"` // leader's wall clock
	Waiting   string   `json:"waiting,omitempty"`   // how long it has waited so far
}

// Resource is status's output.
type Resource struct {
	Resource  string   `json:"resource"`
	Holder    *Lease   `json:"holder,omitempty"` // left out when free
	Waiters   []Waiter `json:"waiters"`
	LockDelay string   `json:"lock_delay,omitempty"` // blocked after an expiry
	// Limit and Slots are set for a semaphore in use: its limit and the
	// holders of its slots.
	Limit int     `json:"limit,omitempty"`
	Slots []Lease `json:"slots,omitempty"`
}

// Lock is one resource as operators see it: locks, locks show.
type Lock struct {
	Resource       string   `json:"resource"`
	Holder         *Lease   `json:"holder,omitempty"`
	HeldFor        string   `json:"held_for,omitempty"`
	WaiterCount    int      `json:"waiter_count"`
	OldestWait     string   `json:"oldest_wait,omitempty"`
	Waiters        []Waiter `json:"waiters"`
	RenewalOverdue bool     `json:"renewal_overdue"`
	ProgressStale  bool     `json:"progress_stale"`
	LockDelay      string   `json:"lock_delay,omitempty"`
}

// Locks is locks' output.
type Locks struct {
	Locks []Lock `json:"locks"`
}

// ForceReleased is force-release's output.
type ForceReleased struct {
	Resource string `json:"resource"`
	LeaseID  uint64 `json:"lease_id"`
	Token    uint64 `json:"token"`
	Owner    string `json:"owner,omitempty"`
}

// AuditRecord is one operator action: audit.
type AuditRecord struct {
	Index     uint64 `json:"index"`
	Time      string `json:"time"`
	Actor     string `json:"actor"`
	Action    string `json:"action"`
	Resource  string `json:"resource"`
	LeaseID   uint64 `json:"lease_id"`
	Token     uint64 `json:"token"`
	Owner     string `json:"owner,omitempty"`
	Operation string `json:"operation,omitempty"`
	Reason    string `json:"reason"`
}

// Audit is audit's output; Truncated says older records were left out.
type Audit struct {
	Records   []AuditRecord `json:"records"`
	Truncated bool          `json:"truncated"`
}

// Member is one server of the raft configuration: cluster members.
type Member struct {
	NodeID   string `json:"node_id"`
	RaftAddr string `json:"raft_addr"`
	Voter    bool   `json:"voter"`
	Leader   bool   `json:"leader"`
}

// Members is cluster members' output.
type Members struct {
	Members []Member `json:"members"`
}

// NodeStatus is one node's raft state: cluster status.
type NodeStatus struct {
	NodeID       string `json:"node_id"`
	RaftAddr     string `json:"raft_addr"`
	State        string `json:"state"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	LastIndex    uint64 `json:"last_index"`
	LeaderNodeID string `json:"leader_node_id,omitempty"`
	LastContact  string `json:"last_contact,omitempty"` // left out for a node that did not answer
	Error        string `json:"error,omitempty"`
}

// ClusterStatus is cluster status' output.
type ClusterStatus struct {
	Nodes []NodeStatus `json:"nodes"`
}

// Election is one election: elections, and (with Index) each line of
// elect --observe.
type Election struct {
	Index      uint64 `json:"index,omitempty"` // elect --observe: the log index of the change
	Election   string `json:"election"`
	Leading    bool   `json:"leading"`
	Value      string `json:"value,omitempty"`
	LeaseID    uint64 `json:"lease_id,omitempty"`
	Token      uint64 `json:"token,omitempty"`
	Owner      string `json:"owner,omitempty"`
	Since      string `json:"since,omitempty"`
	Candidates int    `json:"candidates"`
	ExpiresIn  string `json:"expires_in,omitempty"`
}

// Elections is elections' output.
type Elections struct {
	Elections []Election `json:"elections"`
}

// Event is one line of watch --json. Value is the value when it is UTF-8
// text; other bytes come as ValueBase64 instead.
type Event struct {
	Index       uint64   `json:"index"`
	Kind        string   `json:"kind"`
	LeaseID     uint64   `json:"lease_id,omitempty"`
	Token       uint64   `json:"token,omitempty"`
	Resources   []string `json:"resources,omitempty"`
	Owner       string   `json:"owner,omitempty"`
	Operation   string   `json:"operation,omitempty"`
	Reason      string   `json:"reason,omitempty"`
	Key         string   `json:"key,omitempty"`
	Value       *string  `json:"value,omitempty"`
	ValueBase64 []byte   `json:"value_base64,omitempty"`
	Version     uint64   `json:"version,omitempty"`
}

// IdemRecord is one idempotency key: idem show, idem list.
type IdemRecord struct {
	Key         string `json:"key"`
	State       string `json:"state"` // in_progress or completed
	Token       uint64 `json:"token"`
	Owner       string `json:"owner,omitempty"`
	StartedAt   string `json:"started_at,omitempty"`
	CompletedAt string `json:"completed_at,omitempty"`
	Retention   string `json:"retention,omitempty"`
	ResultSize  int    `json:"result_size"`
	Result      []byte `json:"result,omitempty"` // base64; only when the caller may see it
}

// IdemRecords is idem list's output.
type IdemRecords struct {
	Records []IdemRecord `json:"records"`
}

// Version is version's output, from the binary's build information.
type Version struct {
	Module    string `json:"module"`
	Version   string `json:"module_version"`     // "(devel)" for a build from a checkout
	Revision  string `json:"revision,omitempty"` // the VCS commit it was built from
	Time      string `json:"time,omitempty"`     // the commit's time
	Modified  bool   `json:"modified"`           // built with uncommitted changes
	GoVersion string `json:"go_version"`
}

// KeyValue is one key: kv get, and each key of kv list. Value is the value
// when it is UTF-8 text; other bytes come as ValueBase64 instead.
type KeyValue struct {
	Key         string  `json:"key"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 []byte  `json:"value_base64,omitempty"`
	Version     uint64  `json:"version"`
	LeaseID     uint64  `json:"lease_id,omitempty"` // the lease it is bound to
}

// KeyValues is kv list's output.
type KeyValues struct {
	Keys []KeyValue `json:"keys"`
}

// KeyWritten is kv put's and kv delete's output (version 0: deleted).
type KeyWritten struct {
	Key     string `json:"key"`
	Version uint64 `json:"version"`
	Deleted bool   `json:"deleted,omitempty"`
}

// TxnResult is kv txn's output: which branch ran, each compare's outcome,
// and the keys written with their new versions (0: deleted).
type TxnResult struct {
	Succeeded bool         `json:"succeeded"`
	Compares  []bool       `json:"compares"`
	Writes    []KeyWritten `json:"writes"`
	Index     uint64       `json:"index"`
}

// FenceCheck is check-fence's output: whether a write fenced with Token on
// its target (Resource, Group and Partition, or Queue and Key) would be
// accepted now, and if not, why.
type FenceCheck struct {
	Resource  string  `json:"resource,omitempty"`
	Group     string  `json:"group,omitempty"`
	Partition *uint32 `json:"partition,omitempty"`
	Queue     string  `json:"queue,omitempty"`
	Key       string  `json:"key,omitempty"`
	Token     uint64  `json:"token"`
	Current   bool    `json:"current"`
	Reason    string  `json:"reason,omitempty"`
}

// RunResult is the output of run and elect with -o json, the last
// document on stdout, after the command's own output: what became of the
// lease (of the resource, or of the election's leadership) and the command.
type RunResult struct {
	Resource  string `json:"resource,omitempty"` // run
	Slot      string `json:"slot,omitempty"`     // run --limit: the slot held, the name to fence
	Election  string `json:"election,omitempty"` // elect
	LeaseID   uint64 `json:"lease_id,omitempty"` // left out if the lease was not had
	Token     uint64 `json:"token,omitempty"`
	ExitCode  int    `json:"exit_code"` // run's own status (leasehold help exit-codes)
	LeaseLost bool   `json:"lease_lost"`
	Error     string `json:"error,omitempty"`
}

// AuthToken is auth token's output: the token, shown once, and the entry
// for the auth file, which holds only its hash.
type AuthToken struct {
	Name        string          `json:"name"`
	BearerToken string          `json:"bearer_token"` // not a fencing token: those are "token"
	Entry       json.RawMessage `json:"entry"`
}

// MemberAdded is cluster add's output.
type MemberAdded struct {
	NodeID   string `json:"node_id"`
	RaftAddr string `json:"raft_addr"`
}

// MemberRemoved is cluster remove's output.
type MemberRemoved struct {
	NodeID string `json:"node_id"`
}

// LeaderTransferred is cluster transfer-leader's output: the node asked
// to lead (left out when any follower would do).
type LeaderTransferred struct {
	NodeID      string `json:"node_id,omitempty"`
	Transferred bool   `json:"transferred"`
}

// Recovered is recover's output: whether the data dir was damaged, and if
// it was recovered, what was kept and lost and where the damaged files went.
type Recovered struct {
	DataDir    string `json:"data_dir"`
	Damaged    bool   `json:"damaged"`
	Recovered  bool   `json:"recovered"`
	KeptTo     uint64 `json:"kept_to_index,omitempty"`
	Lost       uint64 `json:"lost,omitempty"`
	TokenFloor uint64 `json:"token_floor,omitempty"`
	Backup     string `json:"backup,omitempty"`
}
