package fsm

// Inventory counts what a state holds, for `leasehold snapshot inspect`.
type Inventory struct {
	LastIndex, LastToken uint64
	Leases, Waiters      int
	LockDelays           int
	Keys                 int
	Elections            int
	Semaphores           int
	IdemKeys             int
	Queues               int
	AuditRecords         int
	DedupRecords         int
}

func (s *State) Inventory() Inventory {
	return Inventory{LastIndex: s.lastIndex, LastToken: s.lastToken, Leases: s.leases.len(), Waiters: s.waiters.len(),
		LockDelays: s.blocks.len(), Keys: s.kv.len(), Elections: len(s.Elections("")), Semaphores: s.sems.len(),
		IdemKeys: s.idem.len(), Queues: s.queuesByName.len(), AuditRecords: len(s.audit), DedupRecords: s.dedup.len()}
}
