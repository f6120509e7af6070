package cliout

// The snapshot commands' structures. A backup's header is the same in
// save's and inspect's output; inspect adds the counts it read from the
// state.

// Backup is a backup file's header: snapshot save.
type Backup struct {
	File      string `json:"file"`
	Index     uint64 `json:"index"` // the log index the state is as of
	Term      uint64 `json:"term"`
	Format    int    `json:"format"` // the state's snapshot version
	Size      int64  `json:"size"`   // bytes of state, after the header
	SHA256    string `json:"sha256"`
	NodeID    string `json:"node_id"` // the node that gave it
	TakenAt   string `json:"taken_at"`
	LastToken uint64 `json:"last_token"` // the largest token granted as of Index
}

// BackupInspected is snapshot inspect's output: the header, checked, and
// what the state holds.
type BackupInspected struct {
	Backup
	Leases          int `json:"leases"`
	Waiters         int `json:"waiters"`
	Keys            int `json:"keys"`
	Elections       int `json:"elections"`
	Semaphores      int `json:"semaphores"`
	IdempotencyKeys int `json:"idempotency_keys"`
	Queues          int `json:"queues"`
}

// Restored is snapshot restore's output: the new node's data dir, id and
// raft address, and the token floor every later grant is above.
type Restored struct {
	File       string `json:"file"`
	DataDir    string `json:"data_dir"`
	NodeID     string `json:"node_id"`
	Advertise  string `json:"advertise"`
	Index      uint64 `json:"index"`
	TokenFloor uint64 `json:"token_floor"`
}
